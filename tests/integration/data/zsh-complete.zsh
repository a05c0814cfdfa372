# Prints, one per line, what zsh's completion offers for the command line in $WORDS, with the
# completion functions of the folder $DIR first on fpath: an interactive zsh in a pseudo-terminal
# (zpty) gets the words and a TAB; a function run before completion prints a start marker, every
# candidate added is printed as it is added, and a function run after it prints an end marker
# and exits. Used by tests/integration/completion.rs.
zmodload zsh/zpty
zpty z zsh -f -i
init=$(mktemp)
cat > $init <<'INIT'
PROMPT=
fpath=(FPATH $fpath)
autoload -U compinit
compinit -u -d $DIR/.zcompdump
bindkey '^I' complete-word
begin_marker() { print -r -- '<<<begin>>>' }
end_marker() { print -r -- '<<<end>>>' }
compprefuncs=( begin_marker )
comppostfuncs=( end_marker exit )
compadd() {
  local -a found
  builtin compadd -O found "$@"
  (( $#found )) && print -rl -- $found
  builtin compadd "$@"
}
print ready
INIT
sed -i "s|FPATH|$DIR|" $init

zpty -w z "source $init"
local line
repeat 10; do zpty -r z line; [[ $line == ready* ]] && break; done
rm -f $init
zpty -w z "$WORDS"$'\t'
local on=0
while zpty -r z line; do
  line=${line%$'\r'}
  [[ $line == *'<<<begin>>>'* ]] && { on=1; continue }
  [[ $line == *'<<<end>>>'* ]] && break
  (( on )) && [[ -n $line ]] && print -r -- $line
done
zpty -d z
