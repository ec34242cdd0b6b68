//! The language of Sextant's own text in a request – the UI's language – which both the
//! focus rules and the intent tables read: a leaf, so neither imports the other for it.

use serde::{Deserialize, Serialize};

/// The language of the text Sextant itself puts in a request (the UI's language).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Language {
    #[default]
    En,
    Zh,
}
