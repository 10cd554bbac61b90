"""Launch commands as argv lists: containers per node, then the launcher.

Every emitter returns a list of strings that reaches the process as it is;
only display joins it (shlex), so a value with spaces, quotes, ``$``, ``;``
or a newline is quoted exactly once.
"""
