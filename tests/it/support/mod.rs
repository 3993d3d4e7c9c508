//! Helpers shared by the integration tests' modules; each module uses only part of them.
#![allow(dead_code)]

#[cfg(feature = "cli")]
pub mod acp;
pub mod bad_fixtures;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod corpus;
pub mod external;
pub mod hang;
#[cfg(feature = "runtime")]
pub mod openai_server;
#[cfg(feature = "cli")]
pub mod peak;
#[cfg(feature = "runtime")]
pub mod redis;
#[cfg(feature = "runtime")]
pub mod reference;
#[cfg(feature = "runtime")]
pub mod rlm_loop;
#[cfg(feature = "runtime")]
pub mod sandbox;
#[cfg(feature = "runtime")]
pub mod search_modes;
#[cfg(feature = "cli")]
pub mod serve;
pub mod tools;
