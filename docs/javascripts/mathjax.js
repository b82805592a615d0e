// MathJax 3 for pymdownx.arithmatex (generic: true), as mkdocs-material documents it: typeset the
// \(...\) and \[...\] that arithmatex leaves in <span|div class="arithmatex">, and again after
// every instant-navigation page change.
window.MathJax = {
  tex: {
    inlineMath: [["\\(", "\\)"]],
    displayMath: [["\\[", "\\]"]],
    processEscapes: true,
    processEnvironments: true,
  },
  options: {
    ignoreHtmlClass: ".*|",
    processHtmlClass: "arithmatex",
  },
};

// MathJax typesets the first page itself when it starts; document$ emits again only on an instant-navigation
// page change, where the new page's maths is typeset afresh. (The site renders SVG: no CHTML font cache to
// clear, so no `MathJax.startup.output.clearCache()`, which SVG output does not have.)
if (typeof document$ !== "undefined") {
  let first = true;
  document$.subscribe(() => {
    if (first) {
      first = false;
      return;
    }
    MathJax.startup.promise.then(() => {
      MathJax.typesetClear();
      MathJax.texReset();
      return MathJax.typesetPromise();
    });
  });
}
