//! Helpers shared by the integration tests.
// Each test binary uses only part of what is here.
#![allow(dead_code)]

pub mod reference;
