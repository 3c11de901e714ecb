"""Hostile chat templates for the fuzz suite: resource bombs, sandbox escapes, deep recursion.

`hostile_template(rng)` builds one from pieces a tester would reach for; every piece is
either harmless or one of the attacks the template budget must stop with a sentence.
"""

from __future__ import annotations

import random

BIG = ("10**9", "4000000000", "99999", "2**40", "100000", "8388609", "-1", "0")

ESCAPES = (
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os.popen('id').read() }}",
    "{{ self._TemplateReference__context }}",
    "{{ raise_exception.__globals__ }}",
    "{{ ''.format.__self__ }}",
    "{{ (lipsum|attr('__globals__')) }}",
    "{% set x = messages.append(1) %}",
    "{{ namespace.__init__ }}",
    "{{ range.__self__ }}",
)

BOMBS = (
    "{{ 'x' * N }}",
    "{{ ['x'] * N }}",
    "{{ 'ab' * 4000000 + 'cd' * 4000000 }}",
    "{{ 7 ** N }}",
    "{{ (10 ** 5000) * (10 ** 5000) * (10 ** 20000) }}",
    "{{ messages | tojson(indent=N) }}",
    "{{ strftime_now('%c' * N) }}",
    "{{ '{:>N}'.format(1) }}",
    "{{ '{:>{w}}'.format(1, w=N) }}",
    "{{ '%Nd' % 1 }}",
    "{{ '%*d' % (N, 1) }}",
    "{{ '%.Nf' | format(1.5) }}",
    "{{ 'x' | center(N) }}",
    "{{ 'a\\nb\\nc' | indent(N) }}",
    "{{ ('x' * 100000) | replace('', 'yyyyyyyyyy' * 100) }}",
    "{{ ('x' * 100000).replace('x', 'y' * 1000) }}",
    "{{ (['x' * 100000] * 1000) | join }}",
    "{{ ', '.join(['x' * 100000] * 1000) }}",
    "{{ 'x'.zfill(N) }}",
    "{{ ('\\t' * 100000).expandtabs(N) }}",
    "{{ range(N) | list | length }}",
    "{{ ('x' * 8000000) | list | sort | length }}",
)

LOOPS = (
    "{% for i in range(99999) %}{% for j in range(99999) %}{% endfor %}{% endfor %}",
    "{% set s = 'ab' * 2000 %}{% for a in s %}{% for b in s %}{% for c in s %}{% endfor %}{% endfor %}{% endfor %}",
    "{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}",
    "{% for m in messages * 100000 %}{% for n in messages * 100000 %}{{ n.content }}{% endfor %}{% endfor %}",
    "{% for i in range(99999) %}{{ messages | tojson(indent=64) }}{% endfor %}",
)

RECURSION = (
    "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
    "{% macro f(n) %}{% if n %}{{ f(n - 1) }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(60) }}",
    "{% macro f(s) %}{{ f(s + s) }}{% endmacro %}{{ f('x') }}",
    "{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}",
    "{% for i in range(3) %}" * 300 + "x" + "{% endfor %}" * 300,
    "{{ " + "(" * 500 + "1" + ")" * 500 + " }}",
    "{{ " + "[" * 2000 + "]" * 2000 + " }}",
)

HARMLESS = (
    "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}",
    "{{ bos_token }}{{ messages | tojson }}{{ eos_token }}",
    "{% if add_generation_prompt %}assistant:{% endif %}",
    "{{ raise_exception('this template needs a system message') }}",
    "{{ undefined_name.attr }}",
    "{% for i in range(3) %}{{ i }}{% endfor %}",
    "",
    "{{ strftime_now('%Y-%m-%d') }}",
    "{%",
    "{{ 1 / 0 }}",
)


def hostile_template(rng: random.Random) -> str:
    """One template: one to three pieces, at least one of them hostile."""
    kind = rng.choice((BOMBS, BOMBS, LOOPS, RECURSION, ESCAPES))
    pieces = [rng.choice(kind).replace("N", rng.choice(BIG))]
    for _ in range(rng.randrange(3)):
        pieces.insert(rng.randrange(len(pieces) + 1), rng.choice(HARMLESS))
    return "".join(pieces)


def every_template() -> list[str]:
    """Each hostile piece on its own, with each big number where it takes one."""
    out = []
    for piece in (*BOMBS, *LOOPS, *RECURSION, *ESCAPES, *HARMLESS):
        out.extend(sorted({piece.replace("N", n) for n in BIG}) if "N" in piece else [piece])
    return out
