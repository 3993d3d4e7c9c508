//! placeholder

mod support;
