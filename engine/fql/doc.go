// Package fql is the front end of FenecQL, fenec's query language: a lexer,
// a parser that turns one statement's text into a typed AST (ast.go), a
// printer that turns the AST back into canonical text, and a pure
// expression evaluator (Eval, Truthy, Compare, Equal) that the engine's
// executor calls once per row.
//
// It is not the executor: it knows nothing of collections, schemas,
// indexes or storage, reads no clock of its own (Env.Now supplies now())
// and does no I/O. Whether a named collection or field exists, whether an
// annotation fits a field's type, and what a statement does to a tenant
// are the engine's to decide.
package fql
