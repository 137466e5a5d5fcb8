package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/infernix/infernix/engine"
	"github.com/infernix/infernix/engine/chat"
)

func init() {
	register("tokenize", "token ids of TEXT (needs only the tokenizer files)", cmdTokenize)
	register("detokenize", "text of token ids 1,2,3 (needs only the tokenizer files)", cmdDetokenize)
	register("template", "the prompt rendered for an OpenAI-style chat request file", cmdTemplate)
}

func loadText(dir, templateFile string) (*engine.Text, error) {
	if dir == "" {
		return nil, fmt.Errorf("--model DIR is required")
	}
	if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("model %s not found", dir)
	}
	t, err := engine.LoadText(dir, templateFile)
	if err != nil {
		return nil, err
	}
	if t.Tokenizer == nil {
		return nil, fmt.Errorf("%s has no tokenizer.json", dir)
	}
	return t, nil
}

func cmdTokenize(args []string, stdout io.Writer) error {
	fs := newFlags("tokenize")
	dir := fs.String("model", "", "model directory (tokenizer.json)")
	asJSON := fs.Bool("json", false, `print {"tokens":[...]}`)
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: infernix tokenize --model DIR [--json] TEXT")
	}
	t, err := loadText(*dir, "")
	if err != nil {
		return err
	}
	ids := t.Tokenizer.Encode(pos[0])
	if *asJSON {
		if ids == nil {
			ids = []int32{}
		}
		return json.NewEncoder(stdout).Encode(map[string]any{"tokens": ids})
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = fmt.Sprint(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(parts, ","))
	return err
}

func cmdDetokenize(args []string, stdout io.Writer) error {
	fs := newFlags("detokenize")
	dir := fs.String("model", "", "model directory (tokenizer.json)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return fmt.Errorf("usage: infernix detokenize --model DIR 1,2,3")
	}
	ids, err := parseIDs(strings.Join(pos, ","))
	if err != nil {
		return err
	}
	t, err := loadText(*dir, "")
	if err != nil {
		return err
	}
	for _, id := range ids {
		if int(id) >= t.Tokenizer.VocabSize() {
			return fmt.Errorf("token id %d is outside the vocabulary (size %d)", id, t.Tokenizer.VocabSize())
		}
	}
	_, err = fmt.Fprintln(stdout, t.Tokenizer.Decode(ids, false))
	return err
}

// chatRequestFile is the part of an OpenAI chat request the template needs.
type chatRequestFile struct {
	Messages            json.RawMessage            `json:"messages"`
	Tools               json.RawMessage            `json:"tools"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"`
	AddGenerationPrompt *bool                      `json:"add_generation_prompt"`
}

func cmdTemplate(args []string, stdout io.Writer) error {
	fs := newFlags("template")
	dir := fs.String("model", "", "model directory (tokenizer_config.json or chat_template.jinja)")
	reqFile := fs.String("request", "", "an OpenAI-style chat request JSON file (messages, tools, chat_template_kwargs)")
	tmpl := fs.String("chat-template", "", "a Jinja template file overriding the model's")
	if _, err := parse(fs, args); err != nil {
		return err
	}
	if *reqFile == "" {
		return fmt.Errorf("--request FILE.json is required")
	}
	if *dir == "" && *tmpl == "" {
		return fmt.Errorf("--model DIR (or --chat-template FILE) is required")
	}
	if _, err := os.Stat(*dir); *dir != "" && err != nil {
		return fmt.Errorf("model %s not found", *dir)
	}
	data, err := os.ReadFile(*reqFile)
	if err != nil {
		return err
	}
	var req chatRequestFile
	if err := json.Unmarshal(data, &req); err != nil {
		return fmt.Errorf("%s: %v", *reqFile, err)
	}
	if len(req.Messages) == 0 {
		return fmt.Errorf("%s: \"messages\" is required", *reqFile)
	}
	t, err := engine.LoadText(*dir, *tmpl)
	if err != nil {
		return err
	}
	if t.Template == nil {
		return fmt.Errorf("%s has no chat template (tokenizer_config.json chat_template or chat_template.jinja); use --chat-template FILE", *dir)
	}
	agp := true
	if req.AddGenerationPrompt != nil {
		agp = *req.AddGenerationPrompt
	}
	out, err := t.Template.Render(chat.Request{Messages: req.Messages, Tools: req.Tools, AddGenerationPrompt: agp,
		Kwargs: req.ChatTemplateKwargs, BOSToken: t.BOS(), EOSToken: t.EOS()})
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, out)
	return err
}
