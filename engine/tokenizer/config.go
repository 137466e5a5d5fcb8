package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Config holds what the engine needs from a model's tokenizer_config.json.
type Config struct {
	BOSToken    string // "" when unset or null
	EOSToken    string
	PadToken    string
	UnkToken    string
	AddBOSToken bool // prepend BOSToken when encoding a prompt
	AddEOSToken bool

	// ChatTemplate is the default chat template ("" if the model has none).
	ChatTemplate string
	// ChatTemplates holds the named templates when the model ships several
	// (tokenizer_config's list form, or additional_chat_templates/*.jinja);
	// the default one is also under "default" then. Nil otherwise.
	ChatTemplates map[string]string
}

// LoadConfig reads tokenizer_config.json from dir (a directory, or the file
// itself). As transformers does, a chat_template.jinja beside it replaces the
// config's default template and additional_chat_templates/NAME.jinja add
// named ones; a processor's chat_template.json is used only when no other
// template exists.
func LoadConfig(dir string) (*Config, error) {
	path := dir
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		path = filepath.Join(dir, "tokenizer_config.json")
	} else {
		dir = filepath.Dir(dir)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer config: %w", err)
	}
	c, err := ParseConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%w (in %s)", err, path)
	}
	if err := c.addTemplateFiles(dir); err != nil {
		return nil, err
	}
	return c, nil
}

// ParseConfig decodes the contents of a tokenizer_config.json.
func ParseConfig(data []byte) (*Config, error) {
	var raw struct {
		BOS          json.RawMessage `json:"bos_token"`
		EOS          json.RawMessage `json:"eos_token"`
		Pad          json.RawMessage `json:"pad_token"`
		Unk          json.RawMessage `json:"unk_token"`
		AddBOS       *bool           `json:"add_bos_token"`
		AddEOS       *bool           `json:"add_eos_token"`
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("tokenizer config: %w", err)
	}
	c := &Config{}
	for _, f := range []struct {
		name string
		raw  json.RawMessage
		dst  *string
	}{{"bos_token", raw.BOS, &c.BOSToken}, {"eos_token", raw.EOS, &c.EOSToken},
		{"pad_token", raw.Pad, &c.PadToken}, {"unk_token", raw.Unk, &c.UnkToken}} {
		s, err := tokenString(f.raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer config: %s: %w", f.name, err)
		}
		*f.dst = s
	}
	c.AddBOSToken = raw.AddBOS != nil && *raw.AddBOS
	c.AddEOSToken = raw.AddEOS != nil && *raw.AddEOS
	if err := c.parseTemplates(raw.ChatTemplate); err != nil {
		return nil, fmt.Errorf("tokenizer config: chat_template: %w", err)
	}
	return c, nil
}

// tokenString accepts a special token written as a string, as an
// AddedToken object ({"content": ...}) or as null.
func tokenString(raw json.RawMessage) (string, error) {
	if isNull(raw) {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var obj struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil || obj.Content == nil {
		return "", fmt.Errorf("want a string or an object with content, got %s", raw)
	}
	return *obj.Content, nil
}

// parseTemplates accepts a template string or a list of {name, template}.
func (c *Config) parseTemplates(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		c.ChatTemplate = s
		return nil
	}
	var list []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		return errors.New("want a string or a list of {name, template}")
	}
	c.ChatTemplates = make(map[string]string, len(list))
	for i, e := range list {
		if e.Name == nil || e.Template == nil {
			return fmt.Errorf("entry %d lacks name or template", i)
		}
		c.ChatTemplates[*e.Name] = *e.Template
	}
	c.ChatTemplate = c.ChatTemplates["default"]
	return nil
}

func (c *Config) addTemplateFiles(dir string) error {
	if b, err := readOptional(filepath.Join(dir, "chat_template.jinja")); err != nil {
		return err
	} else if b != nil {
		c.setDefaultTemplate(string(b))
	}
	extra, err := filepath.Glob(filepath.Join(dir, "additional_chat_templates", "*.jinja"))
	if err != nil {
		return err
	}
	sort.Strings(extra)
	for _, p := range extra {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("tokenizer config: %w", err)
		}
		if c.ChatTemplates == nil {
			c.ChatTemplates = map[string]string{}
			if c.ChatTemplate != "" {
				c.ChatTemplates["default"] = c.ChatTemplate
			}
		}
		c.ChatTemplates[strings.TrimSuffix(filepath.Base(p), ".jinja")] = string(b)
	}
	if c.ChatTemplate != "" || len(c.ChatTemplates) > 0 {
		return nil
	}
	b, err := readOptional(filepath.Join(dir, "chat_template.json"))
	if err != nil || b == nil {
		return err
	}
	var proc struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(b, &proc); err != nil {
		return fmt.Errorf("tokenizer config: chat_template.json: %w", err)
	}
	if err := c.parseTemplates(proc.ChatTemplate); err != nil {
		return fmt.Errorf("tokenizer config: chat_template.json: %w", err)
	}
	return nil
}

func (c *Config) setDefaultTemplate(s string) {
	c.ChatTemplate = s
	if c.ChatTemplates != nil {
		c.ChatTemplates["default"] = s
	}
}

// readOptional returns a file's contents, or nil if it does not exist.
func readOptional(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer config: %w", err)
	}
	return b, nil
}
