//! Adapters for parser scripts that Serial Studio calls differently from Sextant.
//!
//! Old projects defined `parse(frame, separator)` and got the project's separator as a
//! second argument; Sextant calls `parse(frame)`, so a small wrapper appended to the script
//! supplies the separator and the user's function runs unchanged.

use crate::text::script_string_literal;

fn js_banner(what: &str) -> String {
    format!("\n\n// Added on import from Serial Studio: {what}\n")
}

/// Wraps a legacy two-argument `parse(frame, separator)` so it gets its separator.
pub(crate) fn separator_argument(code: &str, separator: &str) -> String {
    format!(
        "{code}{}var __sextantSerialStudioParse = parse;\n\
         parse = function (frame) {{\n\
         \x20 return __sextantSerialStudioParse(frame, {});\n\
         }};\n",
        js_banner("the parser takes the project's separator as a second argument."),
        script_string_literal(separator)
    )
}

/// Parameter names of the first `function parse(...)` in JavaScript code.
pub(crate) fn js_parse_params(code: &str) -> Option<Vec<String>> {
    let mut rest = code;
    loop {
        let at = rest.find("function")?;
        let after = rest.get(at + "function".len()..)?;
        let trimmed = after.trim_start();
        if let Some(named) = trimmed.strip_prefix("parse") {
            let named = named.trim_start();
            if let Some(args) = named.strip_prefix('(') {
                let close = args.find(')')?;
                let list = args.get(..close)?;
                return Some(
                    list.split(',')
                        .map(|p| p.trim().to_string())
                        .filter(|p| !p.is_empty())
                        .collect(),
                );
            }
        }
        rest = after;
    }
}

/// Whether the code holds Serial Studio's old default parser, which only split on the
/// separator (its own migration looks for exactly this function).
pub(crate) fn is_legacy_split_parser(code: &str) -> bool {
    let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    squeezed.contains("functionparse(frame,separator){returnframe.split(separator);}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_parse_parameters() {
        assert_eq!(
            js_parse_params("// x\nfunction helper(a) {}\nfunction parse( frame , sep ) {}"),
            Some(vec!["frame".to_string(), "sep".to_string()])
        );
        assert_eq!(js_parse_params("function parser(x) {}"), None);
        assert_eq!(js_parse_params("function parse("), None);
    }

    #[test]
    fn recognises_the_old_default_parser() {
        assert!(is_legacy_split_parser(
            "/* doc */\nfunction parse(frame, separator) {\n    return frame.split(separator);\n}"
        ));
        assert!(!is_legacy_split_parser(
            "function parse(frame) { return frame.split(','); }"
        ));
    }
}
