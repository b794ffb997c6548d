# lockgen shell: zsh reads this first (ZDOTDIR points here). It gives zsh back the user's ZDOTDIR and .zshenv,
# and before the first prompt (after the user's .zshrc) applies the environment's activation again (the lines
# `lockgen activate --shell zsh` prints) and marks the prompt.
if [[ -n "${LOCKGEN_USER_ZDOTDIR-}" ]]; then ZDOTDIR="$LOCKGEN_USER_ZDOTDIR"; else unset ZDOTDIR; fi
unset LOCKGEN_USER_ZDOTDIR
if [[ -r "${ZDOTDIR:-$HOME}/.zshenv" ]]; then source "${ZDOTDIR:-$HOME}/.zshenv"; fi
_lockgen_activate() {
  eval "$LOCKGEN_ACTIVATE"
  unset LOCKGEN_ACTIVATE
  PROMPT="(lockgen:${LOCKGEN_ENV_NAME}) ${PROMPT}"
  add-zsh-hook -d precmd _lockgen_activate
  unfunction _lockgen_activate
}
autoload -Uz add-zsh-hook
add-zsh-hook precmd _lockgen_activate
