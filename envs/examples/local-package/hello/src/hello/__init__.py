"""The walk-through's local package."""


def greeting() -> str:
    return "hello from a local package"
