//! One-line arithmetic transforms such as `value * 0.1 - 40` or `sqrt(x^2 + 1)`.
//!
//! Compiled once to a small tree and evaluated per value, with no allocation. The variable
//! is `value` (alias `x`); operators `+ - * / % ^` (power binds right), unary minus,
//! parentheses, the constants `pi` and `e`, and the functions listed in [`FUNCTIONS`].

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expression error at column {column}: {message}")]
pub struct ExprError {
    /// 1-based column in the expression text.
    pub column: usize,
    pub message: String,
}

/// Functions an expression may call, with their arity.
pub const FUNCTIONS: &[(&str, usize)] = &[
    ("abs", 1),
    ("sqrt", 1),
    ("exp", 1),
    ("ln", 1),
    ("log", 1),
    ("log10", 1),
    ("log2", 1),
    ("sin", 1),
    ("cos", 1),
    ("tan", 1),
    ("asin", 1),
    ("acos", 1),
    ("atan", 1),
    ("floor", 1),
    ("ceil", 1),
    ("round", 1),
    ("sign", 1),
    ("atan2", 2),
    ("pow", 2),
    ("min", 2),
    ("max", 2),
    ("clamp", 3),
];

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Num(f64),
    Var,
    Neg(Box<Node>),
    Bin(Op, Box<Node>, Box<Node>),
    Call(&'static str, Vec<Node>),
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Pow,
}

/// A compiled expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    root: Node,
}

impl Expr {
    pub fn compile(text: &str) -> Result<Expr, ExprError> {
        let mut p = Parser {
            src: text.as_bytes(),
            pos: 0,
        };
        let root = p.expr(0)?;
        p.skip_ws();
        if p.pos < p.src.len() {
            return Err(p.error("unexpected text after the expression"));
        }
        Ok(Expr { root })
    }

    pub fn eval(&self, value: f64) -> f64 {
        eval(&self.root, value)
    }
}

fn eval(node: &Node, x: f64) -> f64 {
    match node {
        Node::Num(n) => *n,
        Node::Var => x,
        Node::Neg(a) => -eval(a, x),
        Node::Bin(op, a, b) => {
            let (a, b) = (eval(a, x), eval(b, x));
            match op {
                Op::Add => a + b,
                Op::Sub => a - b,
                Op::Mul => a * b,
                Op::Div => a / b,
                Op::Rem => a % b,
                Op::Pow => a.powf(b),
            }
        }
        Node::Call(name, args) => {
            let a = |i: usize| eval(&args[i], x);
            match *name {
                "abs" => a(0).abs(),
                "sqrt" => a(0).sqrt(),
                "exp" => a(0).exp(),
                "ln" | "log" => a(0).ln(),
                "log10" => a(0).log10(),
                "log2" => a(0).log2(),
                "sin" => a(0).sin(),
                "cos" => a(0).cos(),
                "tan" => a(0).tan(),
                "asin" => a(0).asin(),
                "acos" => a(0).acos(),
                "atan" => a(0).atan(),
                "floor" => a(0).floor(),
                "ceil" => a(0).ceil(),
                "round" => a(0).round(),
                "sign" => {
                    let v = a(0);
                    if v > 0.0 {
                        1.0
                    } else if v < 0.0 {
                        -1.0
                    } else {
                        0.0
                    }
                }
                "atan2" => a(0).atan2(a(1)),
                "pow" => a(0).powf(a(1)),
                "min" => a(0).min(a(1)),
                "max" => a(0).max(a(1)),
                "clamp" => a(0).max(a(1)).min(a(2)),
                _ => f64::NAN,
            }
        }
    }
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: impl fmt::Display) -> ExprError {
        ExprError {
            column: self.pos + 1,
            message: message.to_string(),
        }
    }

    fn skip_ws(&mut self) {
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_whitespace())
        {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }

    /// Precedence climbing: `min_prec` 0 = additive, 1 = multiplicative, 2 = power.
    fn expr(&mut self, min_prec: u8) -> Result<Node, ExprError> {
        let mut lhs = self.unary()?;
        loop {
            let (op, prec, right_assoc) = match self.peek() {
                Some(b'+') => (Op::Add, 0, false),
                Some(b'-') => (Op::Sub, 0, false),
                Some(b'*') => (Op::Mul, 1, false),
                Some(b'/') => (Op::Div, 1, false),
                Some(b'%') => (Op::Rem, 1, false),
                Some(b'^') => (Op::Pow, 2, true),
                _ => return Ok(lhs),
            };
            if prec < min_prec {
                return Ok(lhs);
            }
            self.pos += 1;
            let rhs = self.expr(if right_assoc { prec } else { prec + 1 })?;
            lhs = Node::Bin(op, Box::new(lhs), Box::new(rhs));
        }
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        match self.peek() {
            Some(b'-') => {
                self.pos += 1;
                // `-x^2` is `-(x^2)`, as in mathematics.
                Ok(Node::Neg(Box::new(self.expr(2)?)))
            }
            Some(b'+') => {
                self.pos += 1;
                self.unary()
            }
            _ => self.atom(),
        }
    }

    fn atom(&mut self) -> Result<Node, ExprError> {
        match self.peek() {
            None => Err(self.error("expected a number, `value` or `(`")),
            Some(b'(') => {
                self.pos += 1;
                let inner = self.expr(0)?;
                if self.peek() != Some(b')') {
                    return Err(self.error("expected `)`"));
                }
                self.pos += 1;
                Ok(inner)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => self.number(),
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => self.name(),
            Some(c) => Err(self.error(format!("unexpected `{}`", c as char))),
        }
    }

    fn number(&mut self) -> Result<Node, ExprError> {
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
        {
            self.pos += 1;
        }
        if matches!(self.src.get(self.pos), Some(b'e' | b'E')) {
            let save = self.pos;
            self.pos += 1;
            if matches!(self.src.get(self.pos), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if self.src.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
                while self.src.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
            } else {
                self.pos = save;
            }
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        text.parse().map(Node::Num).map_err(|_| ExprError {
            column: start + 1,
            message: format!("`{text}` is not a number"),
        })
    }

    fn name(&mut self) -> Result<Node, ExprError> {
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.pos += 1;
        }
        let name = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
        match name {
            "value" | "x" => return Ok(Node::Var),
            "pi" | "PI" => return Ok(Node::Num(std::f64::consts::PI)),
            "e" | "E" => return Ok(Node::Num(std::f64::consts::E)),
            _ => {}
        }
        let Some(&(fname, arity)) = FUNCTIONS.iter().find(|(f, _)| *f == name) else {
            return Err(ExprError {
                column: start + 1,
                message: format!("unknown name `{name}`; use `value` for the input"),
            });
        };
        if self.peek() != Some(b'(') {
            return Err(self.error(format!("`{fname}` needs arguments in parentheses")));
        }
        self.pos += 1;
        let mut args = Vec::with_capacity(arity);
        if self.peek() != Some(b')') {
            loop {
                args.push(self.expr(0)?);
                match self.peek() {
                    Some(b',') => self.pos += 1,
                    Some(b')') => break,
                    _ => return Err(self.error("expected `,` or `)`")),
                }
            }
        }
        self.pos += 1;
        if args.len() != arity {
            return Err(ExprError {
                column: start + 1,
                message: format!("`{fname}` takes {arity} argument(s), got {}", args.len()),
            });
        }
        Ok(Node::Call(fname, args))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluates_table() {
        let cases: &[(&str, f64, f64)] = &[
            ("value * 0.1 - 40", 500.0, 10.0),
            ("x", 3.0, 3.0),
            ("2 ^ 3 ^ 2", 0.0, 512.0),
            ("-x^2", 3.0, -9.0),
            ("(value + 1) * 2", 4.0, 10.0),
            ("10 % 4", 0.0, 2.0),
            ("max(value, 0)", -5.0, 0.0),
            ("clamp(value, 0, 10)", 42.0, 10.0),
            ("1.5e3 / value", 3.0, 500.0),
            ("sqrt(value) + abs(-2)", 16.0, 6.0),
            ("round(pi * 1000)", 0.0, 3142.0),
        ];
        for (text, input, want) in cases {
            let got = Expr::compile(text).unwrap().eval(*input);
            assert!(
                (got - want).abs() < 1e-9,
                "{text} on {input}: got {got}, want {want}"
            );
        }
    }

    #[test]
    fn errors_point_at_the_column() {
        let e = Expr::compile("value * ").unwrap_err();
        assert_eq!(e.column, 9);
        let e = Expr::compile("value + foo").unwrap_err();
        assert_eq!(e.column, 9);
        assert!(e.message.contains("foo"));
        assert!(Expr::compile("max(1)").is_err());
        assert!(Expr::compile("(1 + 2").is_err());
        assert!(Expr::compile("1 2").is_err());
        assert!(Expr::compile("").is_err());
    }
}
