//! Who may run what: the tier rules every door applies with its caller's settings.

use serde::{Deserialize, Serialize};

use crate::Tier;

/// The caller's settings that tiers depend on.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Policy {
    /// Project edits (Confirm tier) run without asking.
    pub auto_approve_edits: bool,
    /// DeviceGated commands may run at all (they still ask every time).
    pub allow_device_control: bool,
    /// Nobody can be asked (a headless CLI call): commands that would ask are refused
    /// unless pre-approved by the two flags above.
    pub non_interactive: bool,
    /// A program a process source runs may be added, changed and started without asking:
    /// a headless caller's one-time consent, given by the person who started it
    /// (`--allow-process-sources`). Never set for the assistant or a page.
    #[serde(default)]
    pub allow_process_sources: bool,
    /// The paths in this caller's requests were typed by a person (a command line), so it
    /// may write files wherever they name; other callers write only inside the user's
    /// folders unless a person says yes.
    #[serde(default)]
    pub paths_from_person: bool,
}

/// What to do with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Decision {
    Run,
    /// Ask the user first.
    Ask,
    Deny,
}

impl Policy {
    pub fn decide(&self, tier: Tier) -> Decision {
        let ask = if self.non_interactive {
            Decision::Deny
        } else {
            Decision::Ask
        };
        match tier {
            Tier::Safe => Decision::Run,
            Tier::Confirm if self.auto_approve_edits => Decision::Run,
            Tier::Confirm => ask,
            Tier::DeviceGated if !self.allow_device_control => Decision::Deny,
            // Device control is consent to be asked, not to skip asking – except for a
            // headless caller, where the flag itself is the one-time consent.
            Tier::DeviceGated if self.non_interactive => Decision::Run,
            Tier::DeviceGated => Decision::Ask,
            Tier::AlwaysConfirm => ask,
            Tier::Blocked => Decision::Deny,
        }
    }

    /// Why a denied tier was denied, for error messages.
    pub fn denial_reason(&self, tier: Tier) -> &'static str {
        match tier {
            Tier::DeviceGated if !self.allow_device_control => {
                "this command controls a device; enable \"allow device control\" first"
            }
            Tier::Blocked => "this command is blocked for automated callers",
            Tier::Confirm => {
                "this command edits the project and needs approval; enable auto-approve of edits"
            }
            Tier::AlwaysConfirm => {
                "this command is destructive and always needs a person to approve it"
            }
            _ => "not allowed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_table() {
        let interactive = Policy::default();
        assert_eq!(interactive.decide(Tier::Safe), Decision::Run);
        assert_eq!(interactive.decide(Tier::Confirm), Decision::Ask);
        assert_eq!(interactive.decide(Tier::DeviceGated), Decision::Deny);
        assert_eq!(interactive.decide(Tier::AlwaysConfirm), Decision::Ask);
        assert_eq!(interactive.decide(Tier::Blocked), Decision::Deny);
        let trusting = Policy {
            auto_approve_edits: true,
            allow_device_control: true,
            ..Policy::default()
        };
        assert_eq!(trusting.decide(Tier::Confirm), Decision::Run);
        assert_eq!(
            trusting.decide(Tier::DeviceGated),
            Decision::Ask,
            "device control still asks"
        );
        assert_eq!(
            trusting.decide(Tier::AlwaysConfirm),
            Decision::Ask,
            "never auto-approved"
        );
        let headless = Policy {
            non_interactive: true,
            ..Policy::default()
        };
        assert_eq!(headless.decide(Tier::Confirm), Decision::Deny);
        assert_eq!(headless.decide(Tier::AlwaysConfirm), Decision::Deny);
        let headless_devices = Policy {
            non_interactive: true,
            allow_device_control: true,
            auto_approve_edits: true,
            ..Policy::default()
        };
        assert_eq!(headless_devices.decide(Tier::DeviceGated), Decision::Run);
        assert_eq!(headless_devices.decide(Tier::AlwaysConfirm), Decision::Deny);
    }
}
