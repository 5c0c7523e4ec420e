//! Routines: the model of a named, persistent task and its validation.
