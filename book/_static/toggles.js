// The sidebar toggles a reader can see open the sidebars.
// pydata-sphinx-theme 0.17 and sphinx-book-theme 1.3 bind their handlers to the first
// .primary-toggle and .secondary-toggle of the page, which sphinx-book-theme hides; the visible ones,
// in the article's header, did nothing below 992 px. A click on any other toggle is handed to the
// first one, so each theme's own behaviour runs (a modal under 992 px, collapsing above it).
document.addEventListener("DOMContentLoaded", () => {
  for (const kind of [".primary-toggle", ".secondary-toggle"]) {
    const [first, ...others] = document.querySelectorAll(kind);
    for (const button of others) {
      button.addEventListener("click", (event) => {
        event.preventDefault();
        event.stopPropagation();
        first.click();
      });
    }
  }
});
