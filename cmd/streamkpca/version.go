package main

import (
	"encoding/json"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/streamkpca/streamkpca/features"
	"github.com/streamkpca/streamkpca/internal/tools/bench"
)

// versionInfo is what `streamkpca version` prints.
type versionInfo struct {
	Module   string `json:"module"`
	Version  string `json:"version"`
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
	Platform string `json:"platform"`
	SIMD     string `json:"simd"`
	BLAS     string `json:"blas"`
}

func buildInfo() versionInfo {
	v := versionInfo{Module: "github.com/streamkpca/streamkpca", Version: "(devel)", Go: runtime.Version(),
		Platform: runtime.GOOS + "/" + runtime.GOARCH, SIMD: features.SIMD(), BLAS: bench.BLASLabel()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.Module, v.Version = bi.Main.Path, bi.Main.Version
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				v.Commit = s.Value
			case "vcs.modified":
				v.Modified = s.Value == "true"
			}
		}
	}
	return v
}

// cmdVersion prints the build: module version, commit, Go, SIMD level and
// BLAS, as JSON.
func cmdVersion() error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(buildInfo())
}
