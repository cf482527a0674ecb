// Command detlint runs the determinism lint (package paxcron/internal/detlint)
// over package directories and exits 1 if it finds anything.
//
// Usage, from the module root:
//
//	go run ./internal/detlint/cmd/detlint [dir ...]
//
// With no arguments it checks detlint.Packages, the packages held to the
// determinism contract.
package main

import (
	"flag"
	"fmt"
	"os"

	"paxcron/internal/detlint"
)

func main() {
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: detlint [dir ...]\n(default: %v, relative to the module root)\n", detlint.Packages)
	}
	flag.Parse()
	dirs := flag.Args()
	if len(dirs) == 0 {
		dirs = detlint.Packages
	}
	os.Exit(run(dirs))
}

// run lints dirs and returns the exit code: 0 clean, 1 findings, 2 errors.
func run(dirs []string) int {
	found := 0
	for _, dir := range dirs {
		findings, err := detlint.Dir(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		for _, f := range findings {
			fmt.Println(f)
		}
		found += len(findings)
	}
	if found > 0 {
		fmt.Fprintf(os.Stderr, "detlint: %d finding(s) in %d package(s)\n", found, len(dirs))
		return 1
	}
	return 0
}
