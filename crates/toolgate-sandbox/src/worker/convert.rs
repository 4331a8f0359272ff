//! JavaScript values to JSON, read once, within a byte budget (and to text, for the
//! console and errors: `show`).
//!
//! A tool call's arguments are converted here exactly once, and that JSON is what the
//! gateway validates and sends: a getter or `toJSON` cannot show the check one value and
//! the upstream another. Only own enumerable string-keyed properties are read (so
//! `Object.prototype` pollution adds nothing), `toJSON` is never called, functions,
//! symbols and `undefined` are left out as `JSON.stringify` would, and non-finite numbers
//! become `null`.

use rquickjs::object::Filter;
use rquickjs::{Array, Object, Type, Value};
use serde_json::{Map, Number, Value as Json};

/// Nesting deeper than this (or a cycle) is refused.
pub(super) const MAX_DEPTH: usize = 64;

/// Why a value could not be converted.
#[derive(Debug, PartialEq)]
pub(super) enum ConvertError {
    /// Larger than the budget.
    TooLarge,
    /// Nested deeper than [`MAX_DEPTH`] (a cycle looks like this too).
    TooDeep,
    /// The value threw while being read (a getter, a proxy trap, an interrupt).
    Threw(String),
}

impl std::fmt::Display for ConvertError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge => f.write_str("the value is too large"),
            Self::TooDeep => write!(
                f,
                "the value is nested deeper than {MAX_DEPTH} levels or is circular"
            ),
            Self::Threw(m) => write!(f, "reading the value threw: {m}"),
        }
    }
}

/// Converts `v`; `budget` is the bytes of JSON still allowed, roughly counted.
pub(super) fn to_json(v: &Value<'_>, budget: &mut usize) -> Result<Json, ConvertError> {
    Ok(convert(v, 0, budget)?.unwrap_or(Json::Null))
}

fn spend(budget: &mut usize, n: usize) -> Result<(), ConvertError> {
    *budget = budget.checked_sub(n).ok_or(ConvertError::TooLarge)?;
    Ok(())
}

fn threw(e: rquickjs::Error) -> ConvertError {
    ConvertError::Threw(e.to_string())
}

/// `None` for what JSON leaves out (undefined, functions, symbols).
fn convert(v: &Value<'_>, depth: usize, budget: &mut usize) -> Result<Option<Json>, ConvertError> {
    if depth > MAX_DEPTH {
        return Err(ConvertError::TooDeep);
    }
    let json = match v.type_of() {
        Type::Uninitialized
        | Type::Undefined
        | Type::Symbol
        | Type::Function
        | Type::Constructor => return Ok(None),
        Type::Null => {
            spend(budget, 4)?;
            Json::Null
        }
        Type::Bool => {
            spend(budget, 5)?;
            Json::Bool(v.as_bool().unwrap_or(false))
        }
        Type::Int => {
            spend(budget, 8)?;
            Json::from(v.as_int().unwrap_or(0))
        }
        Type::Float => {
            spend(budget, 16)?;
            number(v.as_float().unwrap_or(f64::NAN))
        }
        Type::String => {
            let s = v
                .as_string()
                .map(|s| s.to_string())
                .transpose()
                .map_err(threw)?
                .unwrap_or_default();
            spend(budget, s.len() + 2)?;
            Json::String(s)
        }
        Type::BigInt => {
            // JSON.stringify throws on BigInt; digits keep the value without losing it.
            let s: String = v.get().map_err(threw)?;
            spend(budget, s.len() + 2)?;
            Json::String(s)
        }
        Type::Array => {
            let a: &Array = v.as_array().expect("an array");
            let len = a.len();
            spend(budget, 2 + len)?;
            let mut out = Vec::with_capacity(len.min(1024));
            for i in 0..len {
                let item: Value = a.get(i).map_err(threw)?;
                out.push(convert(&item, depth + 1, budget)?.unwrap_or(Json::Null));
            }
            Json::Array(out)
        }
        _ => {
            let Some(o): Option<&Object> = v.as_object() else {
                return Ok(None);
            };
            spend(budget, 2)?;
            let keys: Vec<String> = o
                .own_keys::<String>(Filter::default())
                .collect::<Result<_, _>>()
                .map_err(threw)?;
            let mut out = Map::new();
            for k in keys {
                let item: Value = o.get(k.as_str()).map_err(threw)?;
                if let Some(j) = convert(&item, depth + 1, budget)? {
                    spend(budget, k.len() + 4)?;
                    out.insert(k, j);
                }
            }
            Json::Object(out)
        }
    };
    Ok(Some(json))
}

/// Integral values stay integers (so `2` validates as an integer), others floats; NaN and
/// the infinities become `null`, as in `JSON.stringify`.
fn number(f: f64) -> Json {
    if f.is_finite() && f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
        Json::from(f as i64)
    } else {
        Number::from_f64(f).map_or(Json::Null, Json::Number)
    }
}

/// A JS string's text, or `None` for anything else.
pub(super) fn text(v: &Value<'_>) -> Option<String> {
    v.as_string().and_then(|s| s.to_string().ok())
}

/// A console argument as text: strings as they are, other values as JSON.
pub(super) fn show(v: &Value<'_>, budget: &mut usize) -> String {
    if let Some(s) = text(v) {
        *budget = budget.saturating_sub(s.len());
        return s;
    }
    if v.is_undefined() {
        return "undefined".into();
    }
    if v.is_function() {
        return "[function]".into();
    }
    match to_json(v, budget) {
        Ok(j) => j.to_string(),
        Err(e) => format!("[{e}]"),
    }
}
