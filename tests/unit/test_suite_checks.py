"""The suite's own checks: a test that names a test image without asking for the fixture
that makes it is found, directly or through a helper of the suite."""

from __future__ import annotations

from tests.integration.conftest import images_named
from tests.integration.images import BASE_IMAGE, IMAGE, OPENMPI_IMAGE


def _helper() -> str:
    return f"{IMAGE} on {BASE_IMAGE}"


class _Site:
    def start(self) -> str:
        return OPENMPI_IMAGE


def _names_nothing(image: str = "builder-test/other:it") -> str:
    return image


def test_images_named_directly_through_a_helper_and_in_a_class() -> None:
    def direct() -> str:
        return IMAGE

    def indirect() -> object:
        return _helper(), _Site()

    assert images_named(direct) == {IMAGE}
    assert images_named(indirect) == {IMAGE, BASE_IMAGE, OPENMPI_IMAGE}


def test_another_string_is_not_an_image_constant() -> None:
    assert images_named(_names_nothing) == frozenset()
