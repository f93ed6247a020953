package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Binaries are the paths of the built commands.
type Binaries struct {
	Node  string // fenec-node
	Shard string // fenec-shard
	Fenec string // fenec
}

// bins and binDir (the directory they were built in) are set by Main
// before the tests run and read-only after.
var (
	bins   Binaries
	binDir string
)

// tagged holds the fenec-shard binaries built with build tags, by tags.
var tagged struct {
	mu    sync.Mutex
	shard map[string]string // guarded by mu
}

// BinEnv names a directory of already built binaries to use instead of
// building them (fenec-node, fenec-shard, fenec inside it).
const BinEnv = "FENEC_E2E_BIN"

// Main builds the binaries into a temporary directory, runs the tests,
// removes the directory, and fails the run if a goroutine or a started
// process outlived the tests. Call it from TestMain.
func Main(m *testing.M) {
	os.Exit(run(m, ""))
}

// MainTags is Main building the binaries with the build tags given (a
// comma-separated list, as go build -tags takes it): tests/nemesis builds
// its nodes with the fault hooks only binaries tagged nemesis have.
func MainTags(m *testing.M, tags string) {
	os.Exit(run(m, tags))
}

func run(m *testing.M, tags string) int {
	dir, err := os.MkdirTemp("", "fenec-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster: temp dir:", err)
		return 2
	}
	defer os.RemoveAll(dir)
	binDir = dir
	if prebuilt := os.Getenv(BinEnv); prebuilt != "" {
		bins = binariesIn(prebuilt)
	} else if bins, err = BuildTags(dir, tags); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 2
	}
	code := m.Run()
	if left := reapAll(); len(left) > 0 {
		fmt.Fprintln(os.Stderr, "cluster: processes left running after the tests (killed now):", strings.Join(left, ", "))
		code = 1
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "cluster: goroutines leaked:", err)
			code = 1
		}
	}
	return code
}

func binariesIn(dir string) Binaries {
	return Binaries{
		Node:  filepath.Join(dir, "fenec-node"),
		Shard: filepath.Join(dir, "fenec-shard"),
		Fenec: filepath.Join(dir, "fenec"),
	}
}

// Build compiles the three commands into dir, without the race detector
// (the processes are the system under test, not the test), and returns
// their paths.
func Build(dir string) (Binaries, error) {
	return BuildTags(dir, "")
}

// BuildTags is Build with build tags ("" for none).
func BuildTags(dir, tags string) (Binaries, error) {
	root, err := moduleRoot()
	if err != nil {
		return Binaries{}, err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	cmd := exec.Command("go", append(args, "./cmd/fenec-node", "./cmd/fenec-shard", "./cmd/fenec")...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return Binaries{}, fmt.Errorf("build binaries: %w\n%s", err, out)
	}
	return binariesIn(dir), nil
}

// ShardTagged is fenec-shard built with the build tags given (a
// comma-separated list), once per run and tags, beside the binaries Main
// built: a router only a tagged binary makes (tests that hold a move at a
// step, internal/nemesis.MovePauseEnv). It fails tb if the build does.
func ShardTagged(tb testing.TB, tags string) string {
	tb.Helper()
	if binDir == "" {
		panic("cluster: ShardTagged called without cluster.Main in TestMain")
	}
	tagged.mu.Lock()
	defer tagged.mu.Unlock()
	if bin, ok := tagged.shard[tags]; ok {
		return bin
	}
	root, err := moduleRoot()
	if err != nil {
		tb.Fatal(err)
	}
	dir := filepath.Join(binDir, "tags-"+strings.ReplaceAll(tags, ",", "-"))
	bin := filepath.Join(dir, "fenec-shard")
	cmd := exec.Command("go", "build", "-tags", tags, "-o", bin, "./cmd/fenec-shard")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("build fenec-shard -tags %s: %v\n%s", tags, err, out)
	}
	if tagged.shard == nil {
		tagged.shard = map[string]string{}
	}
	tagged.shard[tags] = bin
	return bin
}

// Bins returns the binaries Main built; it panics before Main ran.
func Bins() Binaries {
	if bins.Node == "" {
		panic("cluster: Bins called without cluster.Main in TestMain")
	}
	return bins
}

// moduleRoot is the directory holding fenec's go.mod.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside the fenec module")
	}
	return filepath.Dir(mod), nil
}
