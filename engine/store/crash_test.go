package store

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

const (
	helperEnv           = "FENEC_STORE_HELPER"
	helperPathEnv       = "FENEC_STORE_PATH"
	helperCheckpointEnv = "FENEC_STORE_CHECKPOINT"
)

// crashState is the state the crash helper checkpoints at seq: large
// enough that a kill often lands in the middle of writing it.
func crashState(seq uint64) []byte {
	return body(seq, seq, 300_000)
}

// TestHelperProcess is not a test: it is the child the crash and lock
// tests start (the test binary run again with helperEnv set).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		return
	}
	path := os.Getenv(helperPathEnv)
	opts := Options{Sync: SyncAlways, Logger: quietLogger(), RetainBytes: 256 << 10}
	l, err := Open(path, opts, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper open:", err)
		os.Exit(2)
	}
	switch mode {
	case "writer":
		// Append blocks forever, saying each seq once Append returned.
		for {
			seq := l.Seq()
			n := 1 + seq%4
			size := int((seq * 7919) % 70000)
			if _, err := l.Append(KindEngine, n, body(seq+1, seq+n, size)); err != nil {
				fmt.Fprintln(os.Stderr, "helper append:", err)
				os.Exit(3)
			}
			os.Stdout.WriteString(strconv.FormatUint(seq+n, 10) + "\n")
			if os.Getenv(helperCheckpointEnv) != "" && seq%40 < 4 {
				if err := l.Checkpoint(stateWriter(crashState(l.Seq()))); err != nil {
					fmt.Fprintln(os.Stderr, "helper checkpoint:", err)
					os.Exit(3)
				}
			}
		}
	case "lock":
		os.Stdout.WriteString("locked\n")
		io.Copy(io.Discard, os.Stdin) // hold the file until the parent closes stdin
		l.Close()
	}
	os.Exit(0)
}

// helper starts the test binary as a helper child on path.
func helper(t testing.TB, mode, path string, env ...string) (*exec.Cmd, io.WriteCloser, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperPathEnv+"="+path)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, stdin, bufio.NewScanner(stdout)
}

func TestCrashKeepsAcknowledgedBlocks(t *testing.T) {
	t.Run("appends", func(t *testing.T) { crashLoop(t, false) })
	t.Run("appends and checkpoints", func(t *testing.T) { crashLoop(t, true) })
}

// crashLoop kills a writer child at random moments, reopening the file
// after each kill and checking every acknowledged block is whole in it.
func crashLoop(t *testing.T, checkpoints bool) {
	path := tenantPath(t)
	var env []string
	window := 20_000 // µs after the first acknowledgement
	if checkpoints {
		env = append(env, helperCheckpointEnv+"=1")
		window = 60_000 // checkpoints take fsyncs: give some time to finish
	}
	mustClose(t, mustCreate(t, path, testOptions()))
	var acked uint64
	logged := &countingHandler{}
	start := time.Now()
	rounds := 0
	images := 0
	// At least two seconds and five kills; with checkpoints, on until one
	// open came from an image (a loaded machine lands fewer kills after a
	// finished checkpoint), up to a bound that only a checkpoint never
	// replayed reaches.
	const maxRounds = 400
	for time.Since(start) < 2*time.Second || rounds < 5 || (checkpoints && images == 0 && rounds < maxRounds) {
		rounds++
		cmd, _, lines := helper(t, "writer", path, env...)
		var (
			mu      sync.Mutex
			got     uint64
			started = make(chan struct{})
			readErr error
			wg      sync.WaitGroup
		)
		wg.Go(func() {
			first := true
			for lines.Scan() {
				seq, err := strconv.ParseUint(lines.Text(), 10, 64)
				if err != nil {
					readErr = err
					break
				}
				mu.Lock()
				got = seq
				mu.Unlock()
				if first {
					close(started)
					first = false
				}
			}
			if first {
				close(started)
			}
		})
		<-started
		// Kill at a random moment while it appends.
		time.Sleep(time.Duration(rand.IntN(window)) * time.Microsecond)
		cmd.Process.Signal(syscall.SIGKILL)
		wg.Wait() // the pipe ends when the child dies
		cmd.Wait()
		if readErr != nil {
			t.Fatal(readErr)
		}
		mu.Lock()
		if got > acked {
			acked = got
		}
		mu.Unlock()

		c := &collected{}
		opts := testOptions()
		opts.Logger = slog.New(logged)
		l, err := Open(path, opts, c)
		if err != nil {
			t.Fatalf("round %d: open after kill: %v", rounds, err)
		}
		if l.Seq() < acked {
			t.Fatalf("round %d: seq %d after kill, but %d was acknowledged", rounds, l.Seq(), acked)
		}
		seq := c.imageSeq
		if c.hadImage {
			images++
			if !bytes.Equal(c.image, crashState(c.imageSeq)) {
				t.Fatalf("round %d: image at %d is not whole", rounds, c.imageSeq)
			}
		}
		for _, rec := range c.recs {
			if rec.First != seq+1 {
				t.Fatalf("round %d: record %d-%d after %d", rounds, rec.First, rec.Last, seq)
			}
			if want := body(rec.First, rec.Last, len(rec.Body)); !bytes.Equal(rec.Body, want) {
				t.Fatalf("round %d: block %d-%d is not whole", rounds, rec.First, rec.Last)
			}
			seq = rec.Last
		}
		acked = l.Seq() // what survived is the next round's floor
		mustClose(t, l)
	}
	if acked == 0 {
		t.Fatal("the writer acknowledged nothing")
	}
	defer func() {
		if checkpoints && images == 0 {
			t.Fatalf("no checkpoint was ever replayed in %d kills", rounds)
		}
	}()
	t.Logf("%d kills, %d torn tails cut, %d side files removed, %d opens from an image, seq %d", rounds,
		logged.count("store: cut torn tail"), logged.count("store: removed leftover side file"), images, acked)
}

func TestFlockRefusesSecondOpener(t *testing.T) {
	path := tenantPath(t)
	l := mustCreate(t, path, testOptions())

	// In this process.
	if _, err := Open(path, testOptions(), nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open in process: %v", err)
	}
	// The flock itself is held, not only the registry.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := flock(f); !errors.Is(err, ErrLocked) {
		t.Fatalf("flock on a second descriptor: %v", err)
	}
	f.Close()
	mustClose(t, l)

	// From another process.
	cmd, stdin, lines := helper(t, "lock", path)
	if !lines.Scan() || lines.Text() != "locked" {
		t.Fatalf("helper did not lock: %q", lines.Text())
	}
	if _, err := Open(path, testOptions(), nil); !errors.Is(err, ErrLocked) {
		t.Fatalf("open while a child holds it: %v", err)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v", err)
	}
	l2, _ := mustOpen(t, path, testOptions())
	mustClose(t, l2)
}
