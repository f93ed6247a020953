package engine

import (
	"context"
	"path/filepath"
	"testing"
)

func TestSmoke(t *testing.T) {
	db, err := Create(filepath.Join(t.TempDir(), "a.fenec"), Options{NoSweep: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	for _, q := range []string{
		"create collection users (name text required @unique, age int @sorted, tags [text])",
		`put users [{name: "ann", age: 30}, {name: "bob", age: 25, tags: ["x"]}]`,
		"get users",
		"get users where age > 26",
		"get users order age desc limit 1",
		"get users select count(*) as n, sum(age)",
		"set users {age: age + 1} where name = 'bob' returning *",
		"get users count",
	} {
		res, seq, err := db.Exec(ctx, Statement{Query: q})
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		t.Logf("%s -> %s seq %d", q, res.JSON(), seq)
	}
}
