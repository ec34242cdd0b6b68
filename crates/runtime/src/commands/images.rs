//! The image views' newest pictures (`crate::images`), for the dashboard's image tiles.

use base64::Engine as _;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Registry, Tier};

use crate::Workspace;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct ImageParams {
    /// The image group's id.
    group: String,
    /// The `seq` of the picture the caller already has: the picture itself is left out
    /// when it is still the newest.
    #[serde(default)]
    after: Option<u64>,
    /// Include the picture itself (base64); without it, only what describes it.
    #[serde(default)]
    picture: bool,
}

/// Image views, one line each. Kept out of rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register("dashboard.image", Tier::Safe, "An image group's newest picture – its type and size, and with `picture` the picture itself (base64) – and how many arrived, how fast, and how many were broken; `after` leaves out a picture the caller already has.", dashboard_image);
}

fn dashboard_image(ws: &mut Workspace, p: ImageParams) -> Result<Json, CommandError> {
    if !ws.project().groups.iter().any(|g| g.id == p.group) {
        return Err(CommandError::not_found(format!(
            "no group has id `{}`",
            p.group
        )));
    }
    let Some(latest) = ws.live.as_ref().and_then(|l| l.images.latest(&p.group)) else {
        // Not connected, or not an image group in this run: nothing has arrived.
        return Ok(json!({ "seq": 0, "frames": 0, "broken": 0, "rateHz": 0.0 }));
    };
    let mut reply = json!({
        "seq": latest.seq,
        "frames": latest.frames,
        "broken": latest.broken,
        "rateHz": (latest.rate_hz * 10.0).round() / 10.0,
        "ageS": latest.at.map(|t| (t.elapsed().as_secs_f64() * 10.0).round() / 10.0),
    });
    if let Some((format, bytes)) = latest.picture {
        reply["mime"] = json!(format.mime());
        reply["bytes"] = json!(bytes.len());
        if p.picture && p.after != Some(latest.seq) {
            reply["data"] = json!(base64::engine::general_purpose::STANDARD.encode(&bytes));
        }
    }
    Ok(reply)
}
