"""Symbolic sizes: a dimension or integer attribute that depends on the dynamic axes.

A ``SymInt`` is a polynomial in named symbols (``"batch"``, ``"seq"``) whose monomials are
products of distinct symbols (``const + a*batch + b*seq + c*batch*seq``): capture finds the
coefficients by tracing at several sizes (gpucore/runtime/capture/dynamic.py), and
``evaluate`` turns any attribute or shape holding them into plain ints for one set of sizes.
That covers what models do with sizes (``x.view(B * T, C)``, ``x.reshape(B, -1)``, slicing
``[:, : T - 1]``); anything else (``T * T``) is refused at capture.
"""

from __future__ import annotations


class SymInt:
    """``const + sum(coef * product of symbols)`` over monomials of distinct symbols;
    immutable, hashable, compares by value. ``coefs`` maps a symbol name or a tuple of names
    (a product) to its integer coefficient."""

    __slots__ = ("const", "coefs")

    def __init__(self, const: int, coefs: dict):
        self.const = int(const)
        terms = {}
        for k, v in coefs.items():
            mono = (k,) if isinstance(k, str) else tuple(sorted(k))
            terms[mono] = terms.get(mono, 0) + int(v)
        self.coefs = tuple(sorted((k, v) for k, v in terms.items() if v))

    def eval(self, sizes: dict) -> int:
        """The value for the symbols' ``sizes`` (KeyError names a missing symbol)."""
        total = self.const
        for mono, c in self.coefs:
            term = c
            for name in mono:
                term *= sizes[name]
            total += term
        return total

    def symbols(self) -> set:
        return {name for mono, _ in self.coefs for name in mono}

    def single(self):
        """The symbol s when this is ``s + const`` (how an input's dim names a symbol)."""
        if len(self.coefs) == 1 and len(self.coefs[0][0]) == 1 and self.coefs[0][1] == 1:
            return self.coefs[0][0][0]
        return None

    def __eq__(self, other) -> bool:
        return isinstance(other, SymInt) and self.const == other.const and self.coefs == other.coefs

    def __hash__(self) -> int:
        return hash((self.const, self.coefs))

    def __repr__(self) -> str:
        terms = [("*".join(mono) if c == 1 else f"{c}*{'*'.join(mono)}") for mono, c in self.coefs]
        if self.const or not terms:
            terms.append(str(self.const))
        return " + ".join(terms)


def evaluate(value, sizes: dict):
    """``value`` (an attribute: ints, SymInts, tuples, lists, dicts, slices...) with every
    SymInt replaced by its int for ``sizes``."""
    if isinstance(value, SymInt):
        return value.eval(sizes)
    if isinstance(value, tuple):
        return tuple(evaluate(v, sizes) for v in value)
    if isinstance(value, list):
        return [evaluate(v, sizes) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, sizes) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(
            evaluate(value.start, sizes), evaluate(value.stop, sizes), evaluate(value.step, sizes)
        )
    return value


def symbols_in(value) -> set:
    """The symbol names a (nested) attribute or shape uses."""
    if isinstance(value, SymInt):
        return value.symbols()
    if isinstance(value, (tuple, list)):
        return set().union(*(symbols_in(v) for v in value)) if value else set()
    if isinstance(value, dict):
        return symbols_in(tuple(value.values()))
    if isinstance(value, slice):
        return symbols_in((value.start, value.stop, value.step))
    return set()
