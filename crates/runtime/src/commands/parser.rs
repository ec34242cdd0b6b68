//! The frame parser, transforms, and the read-only dry runs that preview them.
//!
//! Every dry run works on throwaway copies: the project is byte-identical before and after
//! (a test proves it for each one).
//!
//! A dry run runs the user's script as often as it is given frames, so it never runs on the
//! owner task: its handler copies the parser (or transform, or project) and the samples,
//! and the run itself is a deferred job ([`Deferred::off`]). It takes at most
//! [`MAX_PREVIEW_FRAMES`] frames or values (more is refused, naming the cap), and all its
//! script calls together get [`dryrun::PREVIEW_BUDGET`]: frames left when that is spent
//! come back as not run, saying so.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use sextant_commands::{CommandError, Deferred, Registry, Tier};
use sextant_telemetry::dryrun::{self, FrameOutcome, MAX_PREVIEW_FRAMES};
use sextant_telemetry::framing::parse_hex_bytes;
use sextant_telemetry::project::{
    Decoder, Framing, ParserConfig, Project, ScriptLanguage, Transform,
};

use super::project::Done;
use crate::convert::{json_to_value, rows_to_json, value_to_json};
use crate::Workspace;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SourceSel {
    /// Source id; the first source when absent.
    #[serde(default)]
    source: Option<String>,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct ParserInfo {
    source: String,
    framing: Framing,
    decoder: Decoder,
    parser: ParserConfig,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetCode {
    #[serde(default)]
    source: Option<String>,
    /// Script defining `parse(frame)`.
    code: String,
    /// `lua` or `javascript`; keeps the current script language (or JavaScript) when absent.
    #[serde(default)]
    language: Option<ScriptLanguage>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetConfig {
    #[serde(default)]
    source: Option<String>,
    parser: ParserConfig,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DryCompile {
    #[serde(default)]
    source: Option<String>,
    /// Code to compile instead of the source's current parser.
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    language: Option<ScriptLanguage>,
}

#[derive(Serialize, JsonSchema)]
struct CompileResult {
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    /// Line of the script the error points at.
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct DryRun {
    #[serde(default)]
    source: Option<String>,
    /// Sample frames, already cut out of the stream (no delimiters).
    frames: Vec<String>,
    /// The frames are hex bytes (`AA 55 01`) rather than text.
    #[serde(default)]
    hex: bool,
    /// Code to try instead of the current parser.
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    language: Option<ScriptLanguage>,
}

#[derive(Serialize, JsonSchema)]
struct FrameResult {
    /// Rows of values; slot 1 is element 0.
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<Vec<Json>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    line: Option<u32>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TransformSet {
    /// Dataset id.
    dataset: String,
    /// The transform, or null to remove it.
    transform: Option<Transform>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TransformDryRun {
    /// The transform to try; the dataset's current one when absent.
    #[serde(default)]
    transform: Option<Transform>,
    #[serde(default)]
    dataset: Option<String>,
    /// Sample inputs (numbers or text).
    values: Vec<Json>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct EndToEndParams {
    #[serde(default)]
    source: Option<String>,
    /// Raw bytes as the device sends them (text with real line breaks, or hex with `hex`).
    data: String,
    #[serde(default)]
    hex: bool,
}

#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
struct EndToEndResult {
    columns: Vec<String>,
    rows: Vec<Vec<Json>>,
    frames: u64,
    checksum_failed: u64,
    oversize_dropped: u64,
    parse_errors: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    last_error: Option<String>,
}

fn source_index(p: &Project, sel: Option<&str>) -> Result<usize, CommandError> {
    match sel {
        None if p.sources.is_empty() => Err(CommandError::failed(
            "the project has no source yet; add one first",
        )),
        None => Ok(0),
        Some(id) => p
            .sources
            .iter()
            .position(|s| s.id == id)
            .ok_or_else(|| CommandError::not_found(format!("no source has id `{id}`"))),
    }
}

fn script_config(
    current: &ParserConfig,
    code: String,
    language: Option<ScriptLanguage>,
) -> ParserConfig {
    let language = language.unwrap_or(match current {
        ParserConfig::Script { language, .. } => *language,
        _ => ScriptLanguage::JavaScript,
    });
    ParserConfig::Script { language, code }
}

/// Refuses more than [`MAX_PREVIEW_FRAMES`] samples in `param` (`what`: "frames", "values").
fn within_cap(param: &str, given: usize, what: &str) -> Result<(), CommandError> {
    if given > MAX_PREVIEW_FRAMES {
        return Err(CommandError::invalid(
            param,
            format!(
                "`{param}` holds {given} {what}; a dry run takes at most \
                 {MAX_PREVIEW_FRAMES} {what}: try a sample of them"
            ),
        ));
    }
    Ok(())
}

fn bytes_of(text: &str, hex: bool) -> Result<Vec<u8>, CommandError> {
    if hex {
        parse_hex_bytes(text).map_err(|e| CommandError::invalid("data", e.to_string()))
    } else {
        Ok(text.as_bytes().to_vec())
    }
}

/// The frame parser and transform commands and their dry runs, one line each; the handler of
/// `project.frameParser.setCode` is `project_frame_parser_set_code`, and so on, below in the same
/// order. Kept out of rustfmt so that each command stays one line.
#[rustfmt::skip]
pub fn register(r: &mut Registry<Workspace>) {
    r.register("project.frameParser.get", Tier::Safe, "A source's framing, decoder and parser (code included).", project_frame_parser_get);
    r.register("project.frameParser.setCode", Tier::Confirm, PROJECT_FRAME_PARSER_SET_CODE, project_frame_parser_set_code)
        .dry_run("project.frameParser.dryCompile")
        .example("split CSV in JavaScript", json!({"code": "function parse(frame) { return frame.split(','); }", "language": "javascript"}));
    r.register("project.frameParser.setConfig", Tier::Confirm, "Sets a source's parser to a built-in one (delimited, key=value, JSON, NMEA, binary…).", project_frame_parser_set_config)
        .dry_run("project.frameParser.dryRun");
    r.register_deferred("project.frameParser.dryCompile", Tier::Safe, "Compiles a parser (the given code, or the source's current parser) without changing anything.", project_frame_parser_dry_compile);
    r.register_deferred("project.frameParser.dryRun", Tier::Safe, "Runs a parser (given code, or the current one) on sample frames; changes nothing.", project_frame_parser_dry_run)
        .example("two CSV frames", json!({"frames": ["1,2,3", "4,5,6"]}));
    r.register("project.transform.set", Tier::Confirm, "Sets or removes a dataset's transform (expression, Lua or JavaScript).", project_transform_set)
        .dry_run("project.transform.dryRun")
        .example("scale a raw ADC reading", json!({"dataset": "ds-1", "transform": {"language": "expression", "code": "value * 3.3 / 4095"}}));
    r.register_deferred("project.transform.dryRun", Tier::Safe, "Runs a transform on sample values; changes nothing.", project_transform_dry_run);
    r.register_deferred("project.dryRun.endToEnd", Tier::Safe, PROJECT_DRY_RUN_END_TO_END, project_dry_run_end_to_end)
        .example("two lines", json!({"data": "1,2\n3,4\n"}));
}

fn project_frame_parser_get(ws: &mut Workspace, p: SourceSel) -> Result<ParserInfo, CommandError> {
    let i = source_index(ws.project(), p.source.as_deref())?;
    let s = &ws.project().sources[i];
    Ok(ParserInfo {
        source: s.id.clone(),
        framing: s.framing.clone(),
        decoder: s.decoder,
        parser: s.parser.clone(),
    })
}

const PROJECT_FRAME_PARSER_SET_CODE: &str =
    "Sets a source's parser to a `parse(frame)` script. It is stored even if it does not compile \
    (so work is never lost); check it with project.frameParser.dryCompile.";

fn project_frame_parser_set_code(ws: &mut Workspace, p: SetCode) -> Result<Done, CommandError> {
    let i = source_index(ws.project(), p.source.as_deref())?;
    ws.edit("set parser code", |proj| {
        let s = &mut proj.sources[i];
        s.parser = script_config(&s.parser, p.code, p.language);
        Ok(Done::ok())
    })
}

fn project_frame_parser_set_config(ws: &mut Workspace, p: SetConfig) -> Result<Done, CommandError> {
    let i = source_index(ws.project(), p.source.as_deref())?;
    dryrun::compile_parser(&p.parser).map_err(|e| CommandError::invalid("parser", e.message))?;
    ws.edit("set parser", |proj| {
        proj.sources[i].parser = p.parser;
        Ok(Done::ok())
    })
}

fn project_frame_parser_dry_compile(
    ws: &mut Workspace,
    p: DryCompile,
) -> Result<Deferred<Workspace, CompileResult>, CommandError> {
    let i = source_index(ws.project(), p.source.as_deref())?;
    let current = &ws.project().sources[i].parser;
    let config = match p.code {
        Some(code) => script_config(current, code, p.language),
        None => current.clone(),
    };
    // Compiling runs the script's top level.
    Ok(Deferred::off(move || {
        Ok(match dryrun::compile_parser(&config) {
            Ok(()) => CompileResult {
                ok: true,
                error: None,
                line: None,
            },
            Err(e) => CompileResult {
                ok: false,
                error: Some(e.message),
                line: e.line,
            },
        })
    }))
}

fn project_frame_parser_dry_run(
    ws: &mut Workspace,
    p: DryRun,
) -> Result<Deferred<Workspace, Vec<FrameResult>>, CommandError> {
    within_cap("frames", p.frames.len(), "frames")?;
    let i = source_index(ws.project(), p.source.as_deref())?;
    let s = &ws.project().sources[i];
    let config = match p.code {
        Some(code) => script_config(&s.parser, code, p.language),
        None => s.parser.clone(),
    };
    let decoder = s.decoder;
    let frames = p
        .frames
        .iter()
        .map(|f| bytes_of(f, p.hex))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Deferred::off(move || {
        let outcomes = dryrun::run_parser(&config, decoder, &frames).map_err(|e| CommandError {
            code: sextant_commands::ErrorCode::Failed,
            message: format!("the parser does not compile: {}", e.message),
            path: e.line.map(|l| format!("line {l}")),
            question: None,
        })?;
        Ok(outcomes
            .into_iter()
            .map(|o| match o {
                FrameOutcome::Rows(rows) => FrameResult {
                    rows: Some(rows_to_json(&rows)),
                    error: None,
                    line: None,
                },
                FrameOutcome::Error { message, line } => FrameResult {
                    rows: None,
                    error: Some(message),
                    line,
                },
            })
            .collect::<Vec<_>>())
    }))
}

fn project_transform_set(ws: &mut Workspace, p: TransformSet) -> Result<Done, CommandError> {
    if let Some(t) = &p.transform {
        dryrun::run_transform(t, &[]).map_err(|e| CommandError::invalid("transform", e))?;
    }
    ws.edit(&format!("set transform of {}", p.dataset), |proj| {
        let d = proj
            .groups
            .iter_mut()
            .flat_map(|g| g.datasets.iter_mut())
            .find(|d| d.id == p.dataset)
            .ok_or_else(|| CommandError::not_found(format!("no dataset has id `{}`", p.dataset)))?;
        d.transform = p.transform;
        Ok(Done::ok())
    })
}

fn project_transform_dry_run(
    ws: &mut Workspace,
    p: TransformDryRun,
) -> Result<Deferred<Workspace, Vec<Json>>, CommandError> {
    within_cap("values", p.values.len(), "values")?;
    let t = match (p.transform, &p.dataset) {
        (Some(t), _) => t,
        (None, Some(id)) => ws
            .project()
            .datasets()
            .find(|d| &d.id == id)
            .and_then(|d| d.transform.clone())
            .ok_or_else(|| CommandError::not_found(format!("dataset `{id}` has no transform")))?,
        (None, None) => {
            return Err(CommandError::invalid(
                "transform",
                "give a transform or a dataset",
            ))
        }
    };
    let values: Vec<_> = p.values.iter().map(json_to_value).collect();
    Ok(Deferred::off(move || {
        let results = dryrun::run_transform(&t, &values).map_err(CommandError::failed)?;
        Ok(results
            .into_iter()
            .map(|r| match r {
                Ok(v) => json!({ "value": value_to_json(&v) }),
                Err(e) => json!({ "error": e }),
            })
            .collect::<Vec<_>>())
    }))
}

const PROJECT_DRY_RUN_END_TO_END: &str =
    "Feeds sample bytes through the whole project (framing, checksum, decoder, parser, \
    transforms) on a throwaway pipeline; changes nothing.";

fn project_dry_run_end_to_end(
    ws: &mut Workspace,
    p: EndToEndParams,
) -> Result<Deferred<Workspace, EndToEndResult>, CommandError> {
    let i = source_index(ws.project(), p.source.as_deref())?;
    let bytes = bytes_of(&p.data, p.hex)?;
    let project = ws.project().clone();
    Ok(Deferred::off(move || {
        // Cutting the frames runs no script: the cap is checked before any script runs.
        let frames = dryrun::count_frames(&project, i, &bytes).map_err(CommandError::failed)?;
        within_cap("data", frames, "frames")?;
        let e = dryrun::end_to_end(&project, i, &bytes).map_err(CommandError::failed)?;
        Ok(EndToEndResult {
            columns: e.columns,
            rows: rows_to_json(&e.rows),
            frames: e.frames,
            checksum_failed: e.checksum_failed,
            oversize_dropped: e.oversize_dropped,
            parse_errors: e.parse_errors,
            last_error: e.last_error,
        })
    }))
}
