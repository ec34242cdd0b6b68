//! Expansion of a `parse()` result into rows: the engine-independent half of the result
//! contract (scalars, array-of-arrays, and the mixed scalar/list form with padding).

use crate::ScriptValue;

/// Most values one call may hand back, before and after expansion. A sparse JS array or a
/// mixed result with one long list and many scalars can describe far more values than the
/// engine's memory cap would suggest; this keeps the host side bounded too.
pub(crate) const MAX_VALUES: usize = 1 << 20;

/// Largest capacity reserved up front from a script-reported length.
pub(crate) const PREALLOCATE: usize = 4096;

/// Counts values while an engine converts a result, refusing past [`MAX_VALUES`].
#[derive(Debug, Default)]
pub(crate) struct Budget {
    used: usize,
}

impl Budget {
    /// Accounts for one more value; the error text is ready for the engine to raise.
    pub(crate) fn take(&mut self) -> Result<(), String> {
        self.used += 1;
        if self.used > MAX_VALUES {
            Err(too_many())
        } else {
            Ok(())
        }
    }
}

fn too_many() -> String {
    format!("the result has more than {MAX_VALUES} values")
}

/// One top-level element of the array a parser returned, already converted by the engine.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Scalar(ScriptValue),
    List(Vec<ScriptValue>),
}

/// Turns the top-level elements of a parser's result into rows.
pub(crate) fn expand(cells: Vec<Cell>) -> Result<Vec<Vec<ScriptValue>>, String> {
    if cells.is_empty() {
        return Ok(Vec::new());
    }
    let lists = cells.iter().filter(|c| matches!(c, Cell::List(_))).count();
    if lists == 0 {
        let row = cells
            .into_iter()
            .map(|c| match c {
                Cell::Scalar(v) => v,
                // Unreachable by the count above; `Null` keeps this total without a panic.
                Cell::List(_) => ScriptValue::Null,
            })
            .collect();
        return Ok(vec![row]);
    }
    if lists == cells.len() {
        return Ok(cells
            .into_iter()
            .map(|c| match c {
                Cell::List(row) => row,
                Cell::Scalar(v) => vec![v],
            })
            .collect());
    }
    expand_mixed(cells)
}

/// Mixed form: the longest list sets the row count, scalars repeat on every row, and a
/// shorter list repeats its last element (an empty list contributes `Null`).
fn expand_mixed(cells: Vec<Cell>) -> Result<Vec<Vec<ScriptValue>>, String> {
    let count = cells
        .iter()
        .map(|c| match c {
            Cell::List(items) => items.len(),
            Cell::Scalar(_) => 0,
        })
        .max()
        .unwrap_or(0);
    if count.saturating_mul(cells.len()) > MAX_VALUES {
        return Err(too_many());
    }
    Ok((0..count)
        .map(|i| {
            cells
                .iter()
                .map(|c| match c {
                    Cell::Scalar(v) => v.clone(),
                    Cell::List(items) => items
                        .get(i)
                        .or_else(|| items.last())
                        .cloned()
                        .unwrap_or(ScriptValue::Null),
                })
                .collect()
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ScriptValue::{Null, Number as N, Text};

    fn list(values: &[f64]) -> Cell {
        Cell::List(values.iter().map(|v| N(*v)).collect())
    }

    #[test]
    fn empty_gives_no_rows() {
        assert_eq!(expand(Vec::new()), Ok(Vec::new()));
    }

    #[test]
    fn scalars_give_one_row() {
        let rows = expand(vec![Cell::Scalar(N(1.0)), Cell::Scalar(Text("a".into()))]);
        assert_eq!(rows, Ok(vec![vec![N(1.0), Text("a".into())]]));
    }

    #[test]
    fn lists_give_one_row_each() {
        let rows = expand(vec![list(&[1.0, 2.0]), list(&[3.0])]);
        assert_eq!(rows, Ok(vec![vec![N(1.0), N(2.0)], vec![N(3.0)]]));
    }

    #[test]
    fn mixed_pads_with_last_element_and_repeats_scalars() {
        let rows = expand(vec![
            Cell::Scalar(N(9.0)),
            list(&[1.0, 2.0, 3.0]),
            list(&[4.0]),
            Cell::List(Vec::new()),
        ]);
        assert_eq!(
            rows,
            Ok(vec![
                vec![N(9.0), N(1.0), N(4.0), Null],
                vec![N(9.0), N(2.0), N(4.0), Null],
                vec![N(9.0), N(3.0), N(4.0), Null],
            ])
        );
    }

    #[test]
    fn mixed_with_only_empty_lists_gives_no_rows() {
        let rows = expand(vec![Cell::Scalar(N(1.0)), Cell::List(Vec::new())]);
        assert_eq!(rows, Ok(Vec::new()));
    }

    #[test]
    fn oversized_mixed_expansion_is_refused() {
        let long = Cell::List(vec![N(0.0); 2048]);
        let mut cells = vec![Cell::Scalar(N(1.0)); 1024];
        cells.push(long);
        assert!(expand(cells).is_err());
    }

    #[test]
    fn budget_refuses_past_the_cap() {
        let mut budget = Budget::default();
        for _ in 0..MAX_VALUES {
            assert!(budget.take().is_ok());
        }
        assert!(budget.take().is_err());
    }
}
