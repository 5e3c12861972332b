//! Wire layer: the Chat Completions data model and the incremental decoders that
//! turn bytes from the network into it. No I/O, no policy, and no dependency on any
//! other module of buddy, so every protocol detail can be unit-tested in isolation.

pub mod chat;
pub mod image;
pub mod schema;
pub mod sse;
pub mod stream;
pub mod tools;

pub use chat::*;
pub use image::Image;
pub use schema::OutputSchema;
pub use tools::ToolList;
