import './base.css';
import './sidebar.css';
