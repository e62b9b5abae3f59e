"""Writing the record as HTML, SVG, CSV, JSON, JUnit and Markdown."""
