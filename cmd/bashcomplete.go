package cmd

import (
	"bytes"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// bashWords stands in for the bash-completion package's
// _get_comp_words_by_ref where that package is not installed (a minimal
// image, a fresh macOS bash). Without it the script cobra writes fails
// before it asks dlqctl anything, and bash, told "-o default", completes
// every file: a plan after apply, but also anything else. This splits the
// line typed so far at blanks, which is all dlqctl's words need (a source
// URL keeps its ':' and '=').
const bashWords = `# Splits the command line when the bash-completion package is not there.
__dlqctl_words_by_ref()
{
    if declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
        _get_comp_words_by_ref "$@"
        return
    fi
    local line=${COMP_LINE:0:COMP_POINT}
    read -r -a words <<< "$line"
    if [[ ${#words[@]} -eq 0 || $line == *[[:space:]] ]]; then
        words+=("")
    fi
    cword=$(( ${#words[@]} - 1 ))
    cur=${words[cword]}
    prev=
    if (( cword > 0 )); then
        prev=${words[cword-1]}
    fi
}

`

// bashCompletion makes "completion bash" write cobra's script with
// bashWords in the place of the package's function.
func bashCompletion(root *cobra.Command) {
	bash, _, err := root.Find([]string{"completion", "bash"})
	if err != nil || bash.Name() != "bash" {
		return
	}
	bash.RunE = func(c *cobra.Command, _ []string) error {
		noDesc, _ := c.Flags().GetBool("no-descriptions")
		var script bytes.Buffer
		if err := root.GenBashCompletionV2(&script, !noDesc); err != nil {
			return err
		}
		out := strings.Replace(script.String(), `_get_comp_words_by_ref "$@" cur prev words cword`, `__dlqctl_words_by_ref "$@" cur prev words cword`, 1)
		_, err := io.WriteString(c.OutOrStdout(), bashWords+out)
		return err
	}
	bash.Run = nil
}
