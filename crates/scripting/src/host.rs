//! The host side of the script contract: the callbacks behind `tableGet`, `tableSet`,
//! `datasetGetRaw`, `datasetGetFinal` and `clearPlots`, plus two ready-made hosts.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::ScriptValue;

/// What a script can reach outside its engine.
///
/// Engines call these from inside script execution, so implementations must be quick and
/// must not call back into the same script.
pub trait Host: Send + Sync {
    /// Value of register `name` in table `table`, or `Null` when either is unknown.
    fn table_get(&self, table: &str, name: &str) -> ScriptValue;
    /// Stores `value` in register `name` of table `table`; refused when the tables are full
    /// (the script's `tableSet` then fails with the reason).
    fn table_set(&self, table: &str, name: &str, value: ScriptValue) -> Result<(), TablesFull>;
    /// Latest raw (pre-transform) value of the dataset with unique id `id`.
    fn dataset_raw(&self, id: &str) -> ScriptValue;
    /// Latest final (post-transform) value of the dataset with unique id `id`.
    fn dataset_final(&self, id: &str) -> ScriptValue;
    /// Asks the dashboard to clear its plots.
    fn clear_plots(&self);
}

/// A host with nothing behind it: every getter returns `Null`, every setter is ignored.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHost;

impl Host for NoHost {
    fn table_get(&self, _table: &str, _name: &str) -> ScriptValue {
        ScriptValue::Null
    }

    fn table_set(&self, _table: &str, _name: &str, _value: ScriptValue) -> Result<(), TablesFull> {
        Ok(())
    }

    fn dataset_raw(&self, _id: &str) -> ScriptValue {
        ScriptValue::Null
    }

    fn dataset_final(&self, _id: &str) -> ScriptValue {
        ScriptValue::Null
    }

    fn clear_plots(&self) {}
}

type Tables = HashMap<String, HashMap<String, ScriptValue>>;

/// Most bytes the tables behind one [`SharedTables`] hold: names and texts, plus a fixed
/// cost per register. The engines' memory cap does not cover the host's tables, and a
/// script that names registers after device data would otherwise grow them for the whole
/// run.
pub const MAX_TABLE_BYTES: usize = 16 * 1024 * 1024;

/// What a register costs against [`MAX_TABLE_BYTES`] beyond its name and text.
const REGISTER_COST: usize = 32;

/// Why `tableSet` was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "tableSet refused: the data tables are full ({MAX_TABLE_BYTES} bytes of names and texts); \
     reuse registers instead of making a new one per value"
)]
pub struct TablesFull;

fn cost(name: &str, value: &ScriptValue) -> usize {
    REGISTER_COST
        + name.len()
        + match value {
            ScriptValue::Text(t) => t.len(),
            _ => 0,
        }
}

/// A host whose tables live in memory and are shared by every script holding it; dataset
/// getters return `Null` and `clearPlots` does nothing.
///
/// Tables registered with [`SharedTables::with_constant_table`] are read-only for scripts:
/// `tableSet` on them is ignored, as project-defined constant tables are.
#[derive(Debug, Default)]
pub struct SharedTables {
    state: Mutex<TablesState>,
}

#[derive(Debug, Default)]
struct TablesState {
    tables: Tables,
    constant: HashSet<String>,
    /// What the tables cost against [`MAX_TABLE_BYTES`].
    bytes: usize,
}

impl TablesState {
    /// Stores a register; with `capped`, refuses one that would take the tables past the cap.
    fn put(
        &mut self,
        table: &str,
        name: &str,
        value: ScriptValue,
        capped: bool,
    ) -> Result<(), TablesFull> {
        let registers = self.tables.get(table);
        let old = registers
            .and_then(|t| t.get(name))
            .map_or(0, |v| cost(name, v));
        let new_table = if registers.is_none() {
            REGISTER_COST + table.len()
        } else {
            0
        };
        let bytes = self.bytes - old + new_table + cost(name, &value);
        if capped && bytes > MAX_TABLE_BYTES && bytes > self.bytes {
            return Err(TablesFull);
        }
        self.bytes = bytes;
        self.tables
            .entry(table.to_owned())
            .or_default()
            .insert(name.to_owned(), value);
        Ok(())
    }
}

impl SharedTables {
    /// An empty set of tables.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) a table whose registers scripts can read but not write.
    pub fn with_constant_table<I, K>(self, table: &str, registers: I) -> Self
    where
        I: IntoIterator<Item = (K, ScriptValue)>,
        K: Into<String>,
    {
        {
            let mut state = self.lock();
            if let Some(old) = state.tables.remove(table) {
                let freed: usize = old.iter().map(|(k, v)| cost(k, v)).sum::<usize>()
                    + REGISTER_COST
                    + table.len();
                state.bytes -= freed;
            }
            for (name, value) in registers {
                let _ = state.put(table, &name.into(), value, false);
            }
            state.tables.entry(table.to_owned()).or_default();
            state.constant.insert(table.to_owned());
        }
        self
    }

    /// Sets a register from the host side, bypassing the read-only rule of constant tables.
    pub fn set(&self, table: &str, name: &str, value: ScriptValue) {
        let _ = self.lock().put(table, name, value, false);
    }

    /// Current value of a register, `Null` when absent.
    pub fn get(&self, table: &str, name: &str) -> ScriptValue {
        self.lock()
            .tables
            .get(table)
            .and_then(|t| t.get(name))
            .cloned()
            .unwrap_or(ScriptValue::Null)
    }

    /// A copy of every table, for inspection or persistence.
    pub fn snapshot(&self) -> Tables {
        self.lock().tables.clone()
    }

    fn lock(&self) -> MutexGuard<'_, TablesState> {
        // A panic while holding the lock cannot leave a half-written map behind (every
        // mutation is a single insert), so a poisoned lock is still safe to use.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl Host for SharedTables {
    fn table_get(&self, table: &str, name: &str) -> ScriptValue {
        self.get(table, name)
    }

    fn table_set(&self, table: &str, name: &str, value: ScriptValue) -> Result<(), TablesFull> {
        let mut state = self.lock();
        if state.constant.contains(table) {
            return Ok(());
        }
        state.put(table, name, value, true)
    }

    fn dataset_raw(&self, _id: &str) -> ScriptValue {
        ScriptValue::Null
    }

    fn dataset_final(&self, _id: &str) -> ScriptValue {
        ScriptValue::Null
    }

    fn clear_plots(&self) {}
}
