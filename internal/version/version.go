// Package version says which build of fenec a binary is: --version on
// every binary prints it.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is the release, set at build time with
// -ldflags "-X github.com/fenec-go/fenec/internal/version.Version=v1.2.3";
// a build without it says "dev".
var Version = "dev"

// String is "<binary> <version> (<commit>[ modified], <go version>)", the
// commit read from the build's VCS stamp when there is one.
func String(binary string) string {
	commit := "unknown commit"
	if bi, ok := debug.ReadBuildInfo(); ok {
		var rev, dirty string
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " modified"
				}
			}
		}
		if len(rev) > 12 {
			rev = rev[:12]
		}
		if rev != "" {
			commit = rev + dirty
		}
	}
	return fmt.Sprintf("%s %s (%s, %s)", binary, Version, commit, runtime.Version())
}
