//! Output controls: a control's value through its `transmit(value)` script to the bytes a
//! device gets.
//!
//! `project.control.send` is DeviceGated like every send: a person's click on the control is
//! the consent (their door sends it approved); the assistant has to ask. It goes through the
//! one send path ([`crate::actions::Sender`]), so the console shows every byte. The script
//! runs off the workspace (it may take up to the sandbox's 500 ms), in a fresh engine per
//! call: a control is clicked, not streamed, and a fresh engine keeps one call's globals
//! out of the next. `project.control.preview` runs the same script and sends nothing, for the
//! project editor and for checking a script before anyone sends.

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_scripting::{Limits, NoHost, ScriptTransmit, ScriptValue};
use sextant_telemetry::project::{Control, ControlKind};

use super::io::{send_to, source_position};
use crate::Workspace;

/// The longest text a text field hands its script.
const MAX_TEXT_CHARS: usize = 4096;

#[derive(Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ControlValue {
    /// The output group's id.
    group: String,
    /// The control's id within the group.
    control: String,
    /// The control's value: ignored for a button (it sends 1), 0/1 or true/false for a
    /// toggle, a number within the control's range for a slider or knob, text for a text
    /// field.
    #[serde(default)]
    value: Json,
}

/// Output controls, one line each. Kept out of rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register_deferred("project.control.send", Tier::DeviceGated, "Sends what an output control's transmit(value) script makes of a value to the control's device, as a click on the control would; the bytes show in the console.", control_send);
    r.register_deferred("project.control.preview", Tier::Safe, "Runs an output control's transmit(value) script on a value and returns the bytes it would send (hex and text), sending nothing.", control_preview);
}

fn control_send(
    ws: &mut Workspace,
    p: ControlValue,
) -> Result<Deferred<Workspace, Json>, CommandError> {
    let (control, value) = find(ws, &p)?;
    // Checked now, so a click while disconnected says so before the script runs.
    if ws.live.is_none() {
        return Err(CommandError::failed("not connected; run io.connect first"));
    }
    source_position(ws, control.source.as_deref())?;
    Ok(Deferred::off_then(
        {
            let control = control.clone();
            move || run(&control, value)
        },
        move |ws, bytes| {
            // The script ran off the workspace: send only if the control still says what
            // ran, to its device as the project names it now.
            let (now, _) = find(ws, &p)?;
            if now.transmit != control.transmit || now.source != control.source {
                return Err(CommandError::failed(
                    "the control changed while its script ran; nothing was sent, send again",
                ));
            }
            if bytes.is_empty() {
                return Ok(
                    json!({ "queuedBytes": 0, "note": "the script returned nothing to send" }),
                );
            }
            let index = source_position(ws, control.source.as_deref())?;
            send_to(ws, index, bytes)
        },
    ))
}

fn control_preview(
    ws: &mut Workspace,
    p: ControlValue,
) -> Result<Deferred<Workspace, Json>, CommandError> {
    let (control, value) = find(ws, &p)?;
    Ok(Deferred::off(move || {
        let bytes = run(&control, value)?;
        Ok(json!({
            "bytes": bytes.len(),
            "hex": bytes.iter().map(|b| format!("{b:02X}")).collect::<Vec<_>>().join(" "),
            "text": String::from_utf8_lossy(&bytes),
        }))
    }))
}

/// The control `p` names and the value its script gets, checked against the control.
fn find(ws: &Workspace, p: &ControlValue) -> Result<(Control, ScriptValue), CommandError> {
    let group = ws
        .project()
        .groups
        .iter()
        .find(|g| g.id == p.group)
        .ok_or_else(|| CommandError::not_found(format!("no group has id `{}`", p.group)))?;
    let control = group
        .controls
        .iter()
        .find(|c| c.id == p.control)
        .ok_or_else(|| {
            CommandError::not_found(format!(
                "group `{}` has no control with id `{}`",
                p.group, p.control
            ))
        })?;
    Ok((control.clone(), script_value(control, &p.value)?))
}

/// What `transmit(value)` receives for `value` set on `control`.
fn script_value(control: &Control, value: &Json) -> Result<ScriptValue, CommandError> {
    let bad = |why: String| CommandError::invalid("value", why);
    match control.kind {
        ControlKind::Button => Ok(ScriptValue::Number(1.0)),
        ControlKind::Toggle => match value {
            Json::Bool(on) => Ok(ScriptValue::Number(f64::from(u8::from(*on)))),
            Json::Number(n) if n.as_f64() == Some(0.0) || n.as_f64() == Some(1.0) => {
                Ok(ScriptValue::Number(n.as_f64().unwrap_or(0.0)))
            }
            _ => Err(bad("a toggle's value is 0 or 1 (or false or true)".into())),
        },
        ControlKind::Slider | ControlKind::Knob => {
            let n = value.as_f64().ok_or_else(|| {
                bad(format!(
                    "a number between {} and {}",
                    control.min, control.max
                ))
            })?;
            if !(control.min..=control.max).contains(&n) {
                return Err(bad(format!(
                    "{n} is outside the control's range, {} to {}",
                    control.min, control.max
                )));
            }
            Ok(ScriptValue::Number(n))
        }
        ControlKind::TextField => {
            let text = value
                .as_str()
                .ok_or_else(|| bad("a text field's value is text".into()))?;
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(bad(format!(
                    "the text is longer than {MAX_TEXT_CHARS} characters"
                )));
            }
            Ok(ScriptValue::Text(text.to_owned()))
        }
    }
}

/// Runs `control`'s script on `value` in a fresh sandboxed engine.
fn run(control: &Control, value: ScriptValue) -> Result<Vec<u8>, CommandError> {
    let limits = Limits {
        memory_bytes: 16 * 1024 * 1024,
        ..Limits::default()
    };
    let title = &control.title;
    ScriptTransmit::compile(&control.transmit, limits, Arc::new(NoHost))
        .and_then(|mut script| script.transmit(value))
        .map_err(|e| CommandError::failed(format!("the script of “{title}” failed: {e}")))
}
