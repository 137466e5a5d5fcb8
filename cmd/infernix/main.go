// Command infernix is an LLM inference server and toolkit for Qwen models.
//
//	infernix serve     --model DIR           OpenAI/Anthropic-compatible HTTP server
//	infernix run       --model DIR          chat in the terminal (or one --prompt)
//	infernix generate  --model DIR ...      raw completion from text or token ids
//	infernix score     --model DIR ...      causal log-probs of a token sequence
//	infernix tokenize  --model DIR TEXT     token ids of TEXT
//	infernix detokenize --model DIR 1,2,3   text of token ids
//	infernix template  --model DIR --request FILE.json   the rendered chat prompt
//	infernix bench     --model DIR ...      decode/prefill throughput
//
// Errors exit non-zero with one line on stderr.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type command struct {
	name, summary string
	run           func(args []string, stdout io.Writer) error
}

var commands []command

func register(name, summary string, run func([]string, io.Writer) error) {
	commands = append(commands, command{name, summary, run})
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: infernix <command> [flags]\n\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'infernix <command> -h' for a command's flags.")
}

func main() {
	os.Exit(runMain(os.Args[1:], os.Stdout, os.Stderr))
}

func runMain(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands {
		if c.name == args[0] {
			err := c.run(args[1:], stdout)
			if err == nil {
				return 0
			}
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			var ex *exitError
			if errors.As(err, &ex) {
				if ex.msg != "" {
					fmt.Fprintln(stderr, "infernix: "+ex.msg)
				}
				return ex.code
			}
			fmt.Fprintln(stderr, "infernix: "+oneLine(err.Error()))
			return 1
		}
	}
	fmt.Fprintf(stderr, "infernix: unknown command %q (run 'infernix help')\n", args[0])
	return 2
}

// exitError carries a specific exit status (e.g. plan's "does not fit").
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func oneLine(s string) string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s, "\n", " ")), " ")
}

// newFlags returns a flag set that reports errors instead of exiting.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("infernix "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// parse parses flags, allowing flags after positional arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(os.Stdout)
				fs.PrintDefaults()
			}
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
