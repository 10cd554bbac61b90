"""The hostile-input corpus: bad and tricky inputs for every command (``corpus.py``)."""
