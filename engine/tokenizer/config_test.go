package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadConfigQwen3(t *testing.T) {
	c, err := LoadConfig(qwen3Dir)
	if err != nil {
		t.Fatal(err)
	}
	if c.EOSToken != "<|im_end|>" || c.PadToken != "<|endoftext|>" || c.BOSToken != "" || c.UnkToken != "" {
		t.Errorf("tokens = bos %q eos %q pad %q unk %q", c.BOSToken, c.EOSToken, c.PadToken, c.UnkToken)
	}
	if c.AddBOSToken || c.AddEOSToken {
		t.Error("add_bos_token/add_eos_token should be false")
	}
	if !strings.Contains(c.ChatTemplate, "<|im_start|>") || !strings.Contains(c.ChatTemplate, "enable_thinking") {
		t.Errorf("unexpected chat template %.80q", c.ChatTemplate)
	}
	if c.ChatTemplates != nil {
		t.Errorf("ChatTemplates = %v, want nil for a single template", c.ChatTemplates)
	}
	// The file itself may be named too.
	c2, err := LoadConfig(filepath.Join(qwen3Dir, "tokenizer_config.json"))
	if err != nil || c2.ChatTemplate != c.ChatTemplate {
		t.Errorf("LoadConfig(file) = %v", err)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name, json string
		want       Config
		wantErr    string
	}{
		{name: "objects", json: `{"bos_token": {"__type": "AddedToken", "content": "<s>", "lstrip": false},
			"eos_token": {"content": "</s>"}, "pad_token": null, "add_bos_token": true, "add_eos_token": false}`,
			want: Config{BOSToken: "<s>", EOSToken: "</s>", AddBOSToken: true}},
		{name: "list", json: `{"chat_template": [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]}`,
			want: Config{ChatTemplate: "D", ChatTemplates: map[string]string{"default": "D", "tool_use": "T"}}},
		{name: "list without default", json: `{"chat_template": [{"name": "rag", "template": "R"}]}`,
			want: Config{ChatTemplates: map[string]string{"rag": "R"}}},
		{name: "empty", json: `{}`},
		{name: "bad token", json: `{"eos_token": 5}`, wantErr: "eos_token"},
		{name: "bad template", json: `{"chat_template": {"x": 1}}`, wantErr: "chat_template"},
		{name: "bad entry", json: `{"chat_template": [{"name": "x"}]}`, wantErr: "entry 0"},
		{name: "not json", json: `{`, wantErr: "tokenizer config"},
	}
	for _, tc := range tests {
		c, err := ParseConfig([]byte(tc.json))
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: err = %v, want %q", tc.name, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !configEqual(*c, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, *c, tc.want)
		}
	}
}

func configEqual(a, b Config) bool {
	if len(a.ChatTemplates) != len(b.ChatTemplates) {
		return false
	}
	for k, v := range a.ChatTemplates {
		if b.ChatTemplates[k] != v {
			return false
		}
	}
	return a.BOSToken == b.BOSToken && a.EOSToken == b.EOSToken && a.PadToken == b.PadToken &&
		a.UnkToken == b.UnkToken && a.AddBOSToken == b.AddBOSToken && a.AddEOSToken == b.AddEOSToken &&
		a.ChatTemplate == b.ChatTemplate
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadConfigTemplateFiles(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"tokenizer_config.json":                 `{"eos_token": "<e>", "chat_template": "from config"}`,
		"chat_template.jinja":                   "from jinja",
		"additional_chat_templates/tool.jinja":  "tool template",
		"additional_chat_templates/notes.txt":   "ignored",
		"chat_template.json":                    `{"chat_template": "from processor"}`,
		"additional_chat_templates/rag.jinja":   "rag template",
		"unrelated/additional_chat_templates.x": "",
	})
	c, err := LoadConfig(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := Config{EOSToken: "<e>", ChatTemplate: "from jinja", ChatTemplates: map[string]string{
		"default": "from jinja", "tool": "tool template", "rag": "rag template"}}
	if !configEqual(*c, want) {
		t.Errorf("got %+v, want %+v", *c, want)
	}

	// The processor's chat_template.json only fills in a missing template.
	dir = writeFiles(t, map[string]string{
		"tokenizer_config.json": `{"eos_token": "<e>"}`,
		"chat_template.json":    `{"chat_template": "from processor"}`,
	})
	if c, err = LoadConfig(dir); err != nil || c.ChatTemplate != "from processor" {
		t.Errorf("processor template: %v, %+v", err, c)
	}

	if _, err := LoadConfig(t.TempDir()); err == nil {
		t.Error("LoadConfig of an empty directory succeeded")
	}
}
