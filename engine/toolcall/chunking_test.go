package toolcall

import (
	"strings"
	"testing"
)

// realisticReplies are replies shaped like what Qwen3 / Qwen3-Coder / Qwen3.5
// write, including the slips they make, for the chunking property test.
func realisticReplies() map[Format][]string {
	code := strings.Repeat("func f() {\n\tif a < b && c > d {\n\t\treturn \"</parameter>\"\n\t}\n}\n", 30)
	longJSON := strings.Repeat(`{"k": "v <tool_call> x"}, `, 60)
	return map[Format][]string{
		FormatJSON: {
			"Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Zürich 🇨🇭\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"東京\", \"days\": 3}}\n</tool_call>",
			"<tool_call>\n{\"name\": \"write_file\", \"arguments\": {\"content\": \"a</tool_call>b\\n{\\\"x\\\": [1, {}]}\"}}\n</tool_call>\n\nDone, the file is written.",
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}\n</tool_call>\nThat was malformed.",
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}}\n</tool_call>",
			"{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
			"{\"name\": \"Bob\", \"age\": 3}\nis a JSON answer.",
			"Use `<tool_call>` tags:\n```json\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>\n```\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}\n</tool_call>",
			"<tool_call>\n{\"name\": \"unknown\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": \"{\\\"city\\\": \\\"Oslo\\\"}\"}\n</tool_call>",
			"</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": null}\n</tool_call>",
			"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Pa",
			"<tool_call>\n{\"name\": \"unknown\", \"arguments\": [" + longJSON + "{}]}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
		},
		FormatXML: {
			"Let me look up the weather.\n\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=write_file>\n<parameter=content>\n" + code + "\n</parameter>\n</function>\n</tool_call>\nWritten.",
			"<tool_call>\n<function=write_file>\n<parameter=content>\nx = \"</tool_call>\"\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=configure>\n<parameter=o>\n{\"a\": {\"b\": [1, \"</parameter>\"]}}\n</parameter>\n<parameter=b>\nTrue\n</parameter>\n<parameter=a>\nNone\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=write_file>\n<parameter=content>\na</parameter>\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=get_weather>\n<parameter name=\"city\">\n日本語\n</parameter>\n<parameter=days\n2\n</parameter>\n</function>\n</tool_call>",
			"Sure:\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=unknown>\n<parameter=city>\nRome\n</parameter>\n</function>\n</tool_call>",
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\nstray text\n</function>\n</tool_call>",
			"<tool_call>\n<function=get_weather>\n<parameter=city>\nPar",
			"<tool_call>\n<function=get_weather>\n<parameter=city>Rome</parameter><parameter=days>2</parameter></function></tool_call><tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>",
			"~~~\n<tool_call>\n<function=get_weather>\n</function>\n</tool_call>\n~~~~\n<tool_call>\n<function=get_weather>\n</function>\n</tool_call>\n",
			"a < b and <b>bold</b> `<function=x>` text <tool_ stops",
		},
	}
}

// TestChunkingInvariance: realistic replies give Parse's result however they
// are cut, with and without a tool list.
func TestChunkingInvariance(t *testing.T) {
	for f, replies := range realisticReplies() {
		for _, in := range replies {
			for _, tools := range [][]Tool{streamTools, nil} {
				checkChunkings(t, f, tools, in)
			}
		}
	}
}
