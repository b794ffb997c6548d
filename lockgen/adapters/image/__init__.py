"""OCI images: the tree and layers an export writes, layouts, layer caches and extraction, images read back."""
