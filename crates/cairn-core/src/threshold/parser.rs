//! The recursive-descent parser over lexed tokens, with its nesting guard.

use serde_json::Value;

use super::lex::{Lexed, Tok};
use super::{EXPECTED_VALUE, Expr, MAX_DEPTH, Operand, ThresholdError};

pub(super) struct Parser {
    pub(super) tokens: Vec<Lexed>,
    pub(super) pos: usize,
    pub(super) depth: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> &Tok {
        // The lexer always ends the list with End, and the cursor never passes it.
        self.tokens.get(self.pos).map_or(&Tok::End, |t| &t.tok)
    }

    fn advance(&mut self) {
        if self.pos + 1 < self.tokens.len() {
            self.pos += 1;
        }
    }

    fn position(&self) -> usize {
        self.tokens.get(self.pos).map_or(0, |t| t.position)
    }

    pub(super) fn unexpected(&self, expected: &'static str) -> ThresholdError {
        match self.tokens.get(self.pos) {
            Some(t) if t.tok != Tok::End => ThresholdError::Unexpected {
                token: t.text.clone(),
                position: t.position,
                expected,
            },
            _ => ThresholdError::UnexpectedEnd {
                position: self.position(),
                expected,
            },
        }
    }

    fn enter(&mut self) -> Result<(), ThresholdError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(ThresholdError::TooDeep {
                position: self.position(),
                max: MAX_DEPTH,
            });
        }
        Ok(())
    }

    pub(super) fn or(&mut self) -> Result<Expr, ThresholdError> {
        let mut left = self.and()?;
        while *self.peek() == Tok::Or {
            self.advance();
            let right = self.and()?;
            left = Expr::Or(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Expr, ThresholdError> {
        let mut left = self.unary()?;
        while *self.peek() == Tok::And {
            self.advance();
            let right = self.unary()?;
            left = Expr::And(Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, ThresholdError> {
        match self.peek() {
            Tok::Not => {
                self.enter()?;
                self.advance();
                let inner = self.unary()?;
                self.depth -= 1;
                Ok(Expr::Not(Box::new(inner)))
            }
            Tok::Open => {
                self.enter()?;
                self.advance();
                let inner = self.or()?;
                if *self.peek() != Tok::Close {
                    return Err(self.unexpected("and, or or )"));
                }
                self.advance();
                self.depth -= 1;
                Ok(inner)
            }
            _ => self.comparison(),
        }
    }

    fn operand(&mut self) -> Result<Operand, ThresholdError> {
        let operand = match self.peek() {
            Tok::Path(path) => Operand::Path(path.clone()),
            Tok::Value(value) => Operand::Literal(value.clone()),
            _ => return Err(self.unexpected(EXPECTED_VALUE)),
        };
        self.advance();
        Ok(operand)
    }

    fn comparison(&mut self) -> Result<Expr, ThresholdError> {
        let left = self.operand()?;
        let op = match self.peek() {
            Tok::Op(op) => *op,
            _ => {
                return match left {
                    Operand::Path(_) | Operand::Literal(Value::Bool(_)) => Ok(Expr::Test(left)),
                    _ => Err(self.unexpected("a comparison (== != > < >= <=) after a value")),
                };
            }
        };
        self.advance();
        let right = self.operand()?;
        if matches!(self.peek(), Tok::Op(_)) {
            // `a < b < c` reads as maths but would compare a bool; say so.
            return Err(self.unexpected("and, or, ) or the end (comparisons do not chain)"));
        }
        Ok(Expr::Compare { left, op, right })
    }
}
