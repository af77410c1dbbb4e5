//! Consistency checks of a device loaded from an image (being written).
