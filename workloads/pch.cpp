// Anchor TU for the shared precompiled header (and for areas with no sources yet).
