"""Labelled (response, gold, correct) triples for the math grader, and the previous ``\\boxed{}`` extractor as
an oracle; shared by the tests and bench/grading.py."""

import re

# (model response, gold answer as in the dataset, whether the response is right)
GRADING_TABLE: list[tuple[str, str, bool]] = [
    # integers and plain numbers
    ("\\boxed{42}", "42", True),
    ("\\boxed{41}", "42", False),
    ("\\boxed{-3}", "-3", True),
    ("\\boxed{3}", "-3", False),
    ("\\boxed{1,000}", "1000", True),
    ("\\boxed{1000.0}", "1000", True),
    ("\\boxed{007}", "7", True),
    # fractions vs decimals
    ("\\boxed{\\frac{1}{2}}", "0.5", True),
    ("\\boxed{0.5}", "\\frac{1}{2}", True),
    ("\\boxed{\\dfrac{3}{4}}", "\\frac{3}{4}", True),
    ("\\boxed{3/4}", "\\frac{3}{4}", True),
    ("\\boxed{0.75}", "\\frac34", True),
    ("\\boxed{\\frac{2}{4}}", "\\frac{1}{2}", True),
    ("\\boxed{\\frac{1}{3}}", "0.5", False),
    ("\\boxed{0.33}", "\\frac{1}{3}", False),
    ("\\boxed{\\frac{11}{12}}", "\\frac{11}{12}", True),
    ("\\boxed{\\frac{12}{11}}", "\\frac{11}{12}", False),
    ("\\boxed{-\\frac{5}{2}}", "-2.5", True),
    ("\\boxed{\\frac{5}{2}}", "-2.5", False),
    # equivalent expressions
    ("\\boxed{x^2+6x+9}", "(x+3)^2", True),
    ("\\boxed{(x+3)^2}", "x^2+6x+9", True),
    ("\\boxed{x^2+9}", "(x+3)^2", False),
    ("\\boxed{2\\sqrt{18}}", "6\\sqrt{2}", True),
    ("\\boxed{\\sqrt{72}}", "6\\sqrt{2}", True),
    ("\\boxed{6\\sqrt{3}}", "6\\sqrt{2}", False),
    ("\\boxed{\\sqrt{2}/2}", "\\frac{\\sqrt{2}}{2}", True),
    ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt{2}}{2}", True),
    ("\\boxed{2\\pi}", "2\\pi", True),
    ("\\boxed{\\pi}", "2\\pi", False),
    ("\\boxed{2^{10}}", "1024", True),
    ("\\boxed{e^{0}}", "1", True),
    ("\\boxed{\\frac{x+1}{2}}", "\\frac{x}{2}+\\frac{1}{2}", True),
    ("\\boxed{x=8}", "8", True),
    ("\\boxed{x = 9}", "8", False),
    # intervals and sets of solutions
    ("\\boxed{(2,3)}", "(2,3)", True),
    ("\\boxed{(2, 3)}", "(2,3)", True),
    ("\\boxed{[2,3]}", "(2,3)", False),
    ("\\boxed{(2,3]}", "(2,3)", False),
    ("\\boxed{(-\\infty, 1) \\cup (2, \\infty)}", "(-\\infty,1)\\cup(2,\\infty)", True),
    ("\\boxed{(-\\infty, 1]}", "(-\\infty,1)", False),
    ("\\boxed{7, -7}", "-7, 7", True),
    ("\\boxed{-7, 7}", "-7, 7", True),
    ("\\boxed{7}", "-7, 7", False),
    ("\\boxed{\\{1, 2, 3\\}}", "\\{1,2,3\\}", True),
    # units, percent and degrees
    ("\\boxed{72\\text{ km/h}}", "72", True),
    ("\\boxed{34 \\text{ dollars}}", "34", True),
    ("\\boxed{\\$34}", "34", True),
    ("\\boxed{35\\text{ dollars}}", "34", False),
    ("\\boxed{720^\\circ}", "720", True),
    ("\\boxed{720^{\\circ}}", "720", True),
    ("\\boxed{25\\%}", "25", True),
    ("\\boxed{54 \\text{ cm}^2}", "54", True),
    ("\\boxed{45 \\text{ cm}^2}", "54", False),
    # text around the box, several boxes, reasoning
    ("The answer is \\boxed{27} muffins.", "27", True),
    ("Step 1: 6*7=42. Step 2: 42-15=27. So the final answer is $\\boxed{27}$.", "27", True),
    ("First guess \\boxed{26}, but rechecking, \\boxed{27}.", "27", True),
    ("First guess \\boxed{27}, but rechecking, \\boxed{26}.", "27", False),
    ("Answer: \\boxed{\\textbf{(C)}\\ 12}", "12", True),
    ("I think it is \\fbox{9}", "9", True),
    ("\\boxed{\\text{C}}", "C", True),
    ("\\boxed{\\text{B}}", "C", False),
    # malformed or missing boxes (no answer at all: a format error, never correct)
    ("The answer is 27.", "27", False),
    ("\\boxed{27", "27", False),
    ("\\boxed27", "27", False),
    ("boxed{27}", "27", False),
    ("\\boxed{}", "27", False),
    ("", "27", False),
    ("\\boxed{\\frac{1}{0}}", "27", False),
    ("\\boxed{)(}{}", "27", False),
]


def reference_extract_boxed(text: str) -> str | None:
    """The previous extractor (a rescan per opener, quadratic): the oracle for the semantics and the
    reference the bench's extraction rows compare to."""
    found = None
    for match in re.finditer(r"\\(?:boxed|fbox)\s*\{", text):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    found = text[start:i].strip()
                    break
    return found
