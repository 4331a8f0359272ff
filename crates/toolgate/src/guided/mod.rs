//! Guided mode: a constant surface of meta-tools (`route`, `execute`, `continue`) whose
//! size does not grow with the catalog.

pub mod surface;
