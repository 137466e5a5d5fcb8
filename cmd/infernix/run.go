package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/chat"
	"github.com/infernix/infernix/engine/sched"
)

func init() {
	register("run", "chat with a model in the terminal (or answer one --prompt)", cmdRun)
}

type message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

func cmdRun(args []string, stdout io.Writer) error {
	fs := newFlags("run")
	var ef engineFlags
	ef.register(fs)
	prompt := fs.String("prompt", "", "answer this one message and exit (otherwise: interactive)")
	system := fs.String("system", "", "system prompt")
	maxTokens := fs.Int("max-tokens", 512, "reply length at most")
	think := fs.Bool("think", true, "let the model think before answering (enable_thinking)")
	temperature := fs.Float64("temperature", -1, "sampling temperature (default: the model's)")
	seed := fs.Int64("seed", -1, "random seed")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *maxTokens < 0 {
		return fmt.Errorf("--max-tokens %d: must not be negative", *maxTokens)
	}
	e, err := ef.load()
	if err != nil {
		return err
	}
	defer e.Close()
	if e.Tokenizer == nil || e.Template == nil {
		return fmt.Errorf("%s needs tokenizer.json and a chat template to chat", ef.model)
	}
	var history []message
	if *system != "" {
		history = append(history, message{"system", *system})
	}
	ask := func(ctx context.Context, text string) error {
		history = append(history, message{"user", text})
		reply, err := chatOnce(ctx, e, history, *think, *maxTokens, *temperature, *seed, stdout)
		if err != nil {
			history = history[:len(history)-1]
			return err
		}
		history = append(history, message{"assistant", reply})
		return nil
	}
	if *prompt != "" {
		return ask(context.Background(), *prompt)
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintf(stdout, "infernix: chatting with %s — empty line or Ctrl-D to quit, Ctrl-C stops a reply\n", ef.model)
	for {
		fmt.Fprint(stdout, "> ")
		if !in.Scan() {
			fmt.Fprintln(stdout)
			return in.Err()
		}
		text := strings.TrimSpace(in.Text())
		if text == "" {
			return nil
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
		err := ask(ctx, text)
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "infernix: "+oneLine(err.Error()))
		}
	}
}

// chatOnce renders the conversation, streams the reply to w and returns it.
func chatOnce(ctx context.Context, e *engine.Engine, history []message, think bool, maxTokens int, temperature float64, seed int64, w io.Writer) (string, error) {
	msgs, _ := json.Marshal(history)
	kwargs := map[string]json.RawMessage{"enable_thinking": json.RawMessage(fmt.Sprint(think))}
	prompt, err := e.Template.Render(chat.Request{Messages: msgs, AddGenerationPrompt: true, Kwargs: kwargs, BOSToken: e.BOS(), EOSToken: e.EOS()})
	if err != nil {
		return "", err
	}
	params := defaultSampling(e)
	if temperature >= 0 {
		params.Temperature = float32(temperature)
	}
	if seed >= 0 {
		s := uint64(seed)
		params.Seed = &s
	}
	req := &sched.Request{Prompt: e.Tokenizer.Encode(prompt), MaxTokens: maxTokens, Sampling: params,
		StopTokens: e.StopTokens(), Logprobs: -1, ThinkBudget: -1, ThinkOpen: -1, ThinkClose: -1}
	events, err := e.Sched.Submit(ctx, req)
	if err != nil {
		return "", err
	}
	dec := e.Tokenizer.NewStreamDecoder(true)
	var reply strings.Builder
	for ev := range events {
		if ev.Done {
			if ev.Err != nil {
				return "", ev.Err
			}
			break
		}
		text := dec.Add(ev.Token)
		reply.WriteString(text)
		fmt.Fprint(w, text)
	}
	rest := dec.Flush()
	reply.WriteString(rest)
	fmt.Fprintln(w, rest)
	return strings.TrimSpace(reply.String()), nil
}
