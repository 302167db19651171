/* Copies a finding's listing query to the clipboard, offline and with no library. Where the
   clipboard is refused, the query is selected instead, for the reader's own copy keystroke. */
document.addEventListener("click", function (event) {
  var button = event.target.closest ? event.target.closest(".kandev-copy") : null;
  if (!button) {
    return;
  }
  var code = document.getElementById(button.getAttribute("data-target"));
  if (!code) {
    return;
  }
  function select() {
    var range = document.createRange();
    range.selectNodeContents(code);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    var copied = false;
    try {
      copied = document.execCommand("copy");
    } catch (error) {
      copied = false;
    }
    button.textContent = copied ? "Copied" : "Selected: press Ctrl+C";
  }
  if (navigator.clipboard && window.isSecureContext) {
    navigator.clipboard.writeText(code.textContent).then(function () {
      button.textContent = "Copied";
    }, select);
  } else {
    select();
  }
});
