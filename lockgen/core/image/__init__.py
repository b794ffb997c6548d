"""Images: layers, config, platforms, references, launchers, SBOMs, and an image proven whole."""
