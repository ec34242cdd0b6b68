//! The generated Markdown command reference.

use crate::registry::CommandSpec;

/// A Markdown document listing every command: tier, description, dry-run partner,
/// parameter and result schemas, examples. Deterministic, so it can be checked in and a
/// test can tell when it is stale.
pub fn markdown_reference<'a>(specs: impl Iterator<Item = &'a CommandSpec>) -> String {
    let specs: Vec<&CommandSpec> = specs.collect();
    let mut out = String::from(
        "# Command reference\n\nGenerated from the command registry; do not edit by hand.\n\
         Every command is callable from the UI, the API server (`sextant serve --api`), MCP,\n\
         the CLI (`sextant call`) and the assistant.\n\n\
         Tiers: **Safe** runs freely; **Confirm** edits the project and asks unless edits are\n\
         auto-approved; **DeviceGated** touches a device and needs \"allow device control\"\n\
         plus a confirmation; **AlwaysConfirm** always asks; **Blocked** never runs from an\n\
         automated caller.\n\n| command | tier | summary |\n|---|---|---|\n",
    );
    for s in &specs {
        let summary = s.description.lines().next().unwrap_or("");
        out.push_str(&format!(
            "| [`{}`](#{}) | {} | {} |\n",
            s.name,
            anchor(&s.name),
            s.tier.as_str(),
            summary
        ));
    }
    for s in &specs {
        out.push_str(&format!(
            "\n## `{}`\n\n{}\n\n- Tier: **{}**\n",
            s.name,
            s.description,
            s.tier.as_str()
        ));
        if let Some(d) = &s.dry_run {
            out.push_str(&format!("- Dry run: [`{d}`](#{})\n", anchor(d)));
        }
        out.push_str(&format!(
            "\nParameters:\n\n```json\n{}\n```\n\nResult:\n\n```json\n{}\n```\n",
            serde_json::to_string_pretty(&s.params_schema).unwrap_or_default(),
            serde_json::to_string_pretty(&s.result_schema).unwrap_or_default()
        ));
        for e in &s.examples {
            out.push_str(&format!(
                "\nExample – {}:\n\n```json\n{}\n```\n",
                e.description,
                serde_json::to_string(&e.params).unwrap_or_default()
            ));
        }
    }
    out
}

fn anchor(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase()
}
