// Command genexample writes configs/streamkpca.yaml from the settings'
// declarations (configs.Example); run it with go generate ./configs.
package main

import (
	"fmt"
	"os"

	"github.com/streamkpca/streamkpca/configs"
)

func main() {
	if err := os.WriteFile("streamkpca.yaml", configs.Example(), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "genexample:", err)
		os.Exit(1)
	}
}
