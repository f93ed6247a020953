package fql

import (
	"strings"
)

// This file parses the schema statements: create collection, create index
// and drop collection.

func (p *parser) createCollection(at int) Stmt {
	p.advance() // collection
	c := &CreateCollection{At: at}
	if p.tok.isKw("if") {
		p.advance()
		p.expectKw("not", "after if")
		p.expectKw("exists", "after if not")
		c.IfNotExists = true
	}
	c.Name = p.collName()
	p.expect("(", "before the field list")
	names := map[string]bool{}
	if !p.tok.is(")") {
		for {
			f := p.fieldDef()
			if f.Name == "id" {
				p.fail(f.At, "field id is implicit and cannot be declared")
			}
			if names[f.Name] {
				p.fail(f.At, "field %s declared twice", f.Name)
			}
			names[f.Name] = true
			c.Fields = append(c.Fields, f)
			if !p.accept(",") {
				break
			}
		}
	}
	p.expect(")", "after field list")
	return c
}

func (p *parser) fieldDef() FieldDef {
	name := p.ident("a field name")
	f := FieldDef{At: name.pos, Name: name.val, Type: p.fieldType()}
	kinds := map[AnnotKind]bool{}
	for {
		switch {
		case p.tok.isKw("required"):
			if f.Required {
				p.fail(p.tok.pos, `"required" given twice`)
			}
			p.advance()
			f.Required = true
			continue
		case p.tok.is("@"):
			a := p.annot()
			if kinds[a.Kind] {
				p.fail(a.At, "%s given twice on field %s", a.String(), f.Name)
			}
			kinds[a.Kind] = true
			f.Annots = append(f.Annots, a)
			continue
		}
		return f
	}
}

var scalarTypes = map[string]TypeKind{
	"bool": TypeBool, "int": TypeInt, "float": TypeFloat, "text": TypeText,
	"timestamp": TypeTimestamp, "json": TypeJSON,
}

var listTypes = map[string]TypeKind{"text": TypeTextList, "int": TypeIntList, "float": TypeFloatList}

const typeNames = "bool, int, float, text, timestamp, json, vector<N>, [text], [int] or [float]"

func (p *parser) fieldType() Type {
	if p.accept("[") {
		t := p.ident("a list element type (text, int or float)")
		k, ok := listTypes[strings.ToLower(t.val)]
		if !ok {
			p.fail(t.pos, "lists hold text, int or float, not %s", t.describe())
		}
		p.expect("]", "after the list element type")
		return Type{Kind: k}
	}
	t := p.ident("a type (" + typeNames + ")")
	if t.isKw("vector") {
		p.expect("<", "after vector")
		dim, _ := p.intIn("the vector dimension", 1, MaxVectorDim)
		p.expect(">", "after the vector dimension")
		return Type{Kind: TypeVector, Dim: int(dim)}
	}
	k, ok := scalarTypes[strings.ToLower(t.val)]
	if !ok {
		p.fail(t.pos, "unknown type %s (%s)", t.describe(), typeNames)
	}
	return Type{Kind: k}
}

func (p *parser) createIndex(at int) Stmt {
	p.advance() // index
	p.expectKw("on", "after create index")
	c := &CreateIndex{At: at, Coll: p.collName()}
	p.expect("(", "before the field name")
	c.Field = p.ident("a field name").val
	p.expect(")", "after the field name")
	if !p.tok.is("@") {
		p.expected("an annotation (@hash, @unique, @sorted, @text, @ttl, @hnsw)")
	}
	c.Annot = p.annot()
	return c
}

func (p *parser) dropCollection() Stmt {
	at := p.advance().pos
	p.expectKw("collection", "after drop")
	d := &DropCollection{At: at}
	if p.tok.isKw("if") {
		p.advance()
		p.expectKw("exists", "after if")
		d.IfExists = true
	}
	d.Name = p.collName()
	return d
}
