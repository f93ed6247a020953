package engine

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const checkpointCrashEnv = "FENEC_ENGINE_CHECKPOINT_CRASH_PATH"

// TestCheckpointCrashWriter is the child process of
// TestKilledInACheckpoint: it lands blocks of blockSize puts with vectors
// under SyncAlways, printing each acknowledged block, and checkpoints
// after every third, printing "checkpoint" as it starts, until killed.
func TestCheckpointCrashWriter(t *testing.T) {
	path := os.Getenv(checkpointCrashEnv)
	if path == "" {
		t.Skip("runs only as TestKilledInACheckpoint's child process")
	}
	opts := Options{Sync: SyncAlways, NoSweep: true, Logger: discardLogger()}
	var db *DB
	var err error
	if _, statErr := os.Stat(path); statErr != nil {
		if db, err = Create(path, opts); err == nil {
			_, _, err = db.Exec(context.Background(), Statement{Query: "create collection c (block int @hash, k int, e vector<32> @hnsw(cosine))"})
		}
	} else {
		db, err = Open(path, opts)
	}
	if err != nil {
		fmt.Println("error", err)
		os.Exit(2)
	}
	out := bufio.NewWriter(os.Stdout)
	rng := rand.New(rand.NewPCG(uint64(db.Seq()), 5))
	for b := int(db.Seq()); ; b++ {
		docs := make([]any, blockSize*40)
		for k := range docs {
			e := make([]any, 32)
			for j := range e {
				e[j] = rng.Float64()*2 - 1
			}
			docs[k] = map[string]any{"block": int64(b), "k": int64(k), "e": e}
		}
		_, seq, err := db.Exec(context.Background(), Statement{Query: "put c $1", Params: []any{docs}})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(2)
		}
		fmt.Fprintf(out, "ack %d %d\n", seq, b)
		if b%3 == 0 {
			fmt.Fprintln(out, "checkpoint")
			out.Flush()
			if err := db.Checkpoint(); err != nil {
				fmt.Println("error", err)
				os.Exit(2)
			}
		}
		out.Flush()
	}
}

// TestKilledInACheckpoint kills a writer (SIGKILL) as it starts writing a
// checkpoint, the image whose graph sections are mapped after, and checks
// after each kill that the file opens, every acknowledged block is in it,
// and its graph answers.
func TestKilledInACheckpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	path := filepath.Join(t.TempDir(), "ckpt.fenec")
	rng := rand.New(rand.NewPCG(13, 14))
	acked := map[int64]bool{}
	for round := range 4 {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCheckpointCrashWriter$", "-test.count=1")
		cmd.Env = append(os.Environ(), checkpointCrashEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Killed as its k-th checkpoint starts: the kill lands while the
		// checkpoint's side file is written (or just after).
		k, seen := 1+rng.IntN(3), 0
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			l := sc.Text()
			if l == "checkpoint" {
				if seen++; seen == k {
					_ = cmd.Process.Signal(syscall.SIGKILL)
				}
				continue
			}
			if strings.HasPrefix(l, "error") {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("round %d: writer: %s", round, l)
			}
			recordAck(t, l, acked)
		}
		_ = cmd.Wait()
		checkCheckpointCrash(t, path, acked)
	}
	if len(acked) == 0 {
		t.Fatal("the writer acknowledged nothing")
	}
}

func checkCheckpointCrash(t *testing.T, path string, acked map[int64]bool) {
	t.Helper()
	db, err := Open(path, Options{NoSweep: true, Logger: discardLogger()})
	if err != nil {
		t.Fatalf("reopen after kill: %v", err)
	}
	defer db.Close()
	res, _, err := db.Exec(context.Background(), Statement{Query: "get c select block, count(*) as n group block"})
	if err != nil {
		t.Fatal(err)
	}
	have := map[int64]int64{}
	for _, r := range res.Rows {
		have[r["block"].(int64)] = r["n"].(int64)
	}
	for b := range acked {
		if have[b] != blockSize*40 {
			t.Fatalf("acknowledged block %d: %d of %d puts", b, have[b], blockSize*40)
		}
	}
	q := "get c select id near e [" + strings.TrimSuffix(strings.Repeat("0.5, ", 32), ", ") + "] limit 5"
	for _, exact := range []string{"", " exact"} {
		res, _, err := db.Exec(context.Background(), Statement{Query: strings.Replace(q, " limit", exact+" limit", 1)})
		if err != nil || len(res.Rows) != 5 {
			t.Fatalf("near%s after the kill: %d rows, %v", exact, len(res.Rows), err)
		}
	}
}
