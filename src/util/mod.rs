//! Small building blocks shared by every stage.

pub mod clock;
pub mod lifecycle;
pub mod quantity;
